"""Train DigitsTrial with the Trainer API: locally (`python3 trainer_main.py`) or as an entrypoint.

Off the master the hyperparameters below are used; on the master they come from the config.
"""

import logging

from model_def import DigitsTrial

import determined as det
import determined.pytorch as det_torch

LOCAL_HPARAMS = {"global_batch_size": 32, "learning_rate": 0.05, "hidden_size": 64, "dropout": 0.1}


def main() -> None:
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    info = det.get_cluster_info()
    latest_checkpoint = info.latest_checkpoint if info is not None else None
    with det_torch.init(hparams=LOCAL_HPARAMS) as context:
        trial = DigitsTrial(context)
        trainer = det_torch.Trainer(trial, context)
        trainer.fit(
            max_length=det_torch.Epoch(2),
            validation_period=det_torch.Batch(50),
            checkpoint_period=det_torch.Epoch(1),
            reporting_period=det_torch.Batch(25),
            latest_checkpoint=latest_checkpoint,
        )


if __name__ == "__main__":
    main()
