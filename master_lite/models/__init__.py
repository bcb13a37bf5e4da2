"""The model registry: models, their versions, the checkpoints they keep (`Models`)."""

from master_lite.models._models import Models, check_model_name
from master_lite.store import MODEL_ORDERS

__all__ = ["MODEL_ORDERS", "Models", "check_model_name"]
