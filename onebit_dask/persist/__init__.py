"""A fitted model on disk: the model store's format (:mod:`.model_store`, its label blocks
written where they live) and a fit's state in it or in a checkpoint (:mod:`.saving`)."""

from .model_store import ModelStoreError, check_store_target, read_attrs, store_path
from .saving import Checkpoint, SaveError, model_attrs, open_model, read_state, save

__all__ = ["Checkpoint", "ModelStoreError", "SaveError", "check_store_target", "model_attrs",
           "open_model", "read_attrs", "read_state", "save", "store_path"]
