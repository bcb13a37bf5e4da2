"""Launchers: run a training script once per slot with the right distributed environment.

* ``python3 -m determined.launch.torch_distributed [TORCHRUN_OVERRIDES... --] SCRIPT...``
* ``python3 -m determined.launch.tensorflow [--port PORT] [--] SCRIPT...``: one worker per slot
  with a multi-worker ``TF_CONFIG``
* ``python3 -m determined.launch.horovod [HVD_OVERRIDES... --] SCRIPT...`` and
  ``python3 -m determined.launch.deepspeed SCRIPT...``: hand over to horovodrun / deepspeed
  where installed; without them one slot runs the script directly
* ``python3 -m determined.launch.wrap_rank [--no-redirect-stdio] RANK [--] CMD...``

Nothing here imports torch, TensorFlow, Horovod or DeepSpeed: only the workers pay for them.
"""
