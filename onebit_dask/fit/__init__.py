"""The fit: the loop over batches and the steps of the algorithm, on an engine.

* :mod:`.state`: :class:`~.state.FitSettings` (what a fit was asked) and
  :class:`~.state.FitState` (what it has learned);
* :mod:`.steps`: the registry of step rules (size, moment step or not, label scale);
* :mod:`.loop`: ``fit_source`` and ``partial_step``, the loop over batches;
* :mod:`.algorithm`: the initialisation and the steps, reduced in block order;
* :mod:`.select`: ``step="select"``'s branches, kept by progressive validation;
* :mod:`.validation`: the bits held out of each batch to score a fit;
* :mod:`.evaluation`: what ``history_`` records at an evaluated iteration (the planted
  truth's metrics, ``eval_set``'s ranking metrics), block by block;
* :mod:`.calibration`: ``predict_proba``'s link, fitted on held-out bits;
* :mod:`.queries`: the batches of learner-chosen queries;
* :mod:`.progress`: the progress bar.
"""
