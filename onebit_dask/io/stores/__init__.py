"""What the package's zarr stores share (observations, models and checkpoints, sweep cubes,
CSR stores).

- :mod:`.zarr_format`: format attributes, typed attribute reads, chunk checks through
  zarr's store API, and the one :class:`~.zarr_format.DamagedStoreError`;
- :mod:`.atomic`: marked temporaries and the atomic replace of a local store; nothing
  the package did not create is renamed or removed;
- :mod:`.paths`: local paths and URLs that fsspec reaches;
- :mod:`.lock`: one writer per store (``STORE.lock`` with a heartbeat).

Where a store lives and how it is written: ``docs/STORES.md``.
"""
