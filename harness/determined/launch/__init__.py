"""Launchers: run a training script once per slot with the right distributed environment.

* ``python3 -m determined.launch.torch_distributed [TORCHRUN_OVERRIDES... --] SCRIPT...``
* ``python3 -m determined.launch.wrap_rank [--no-redirect-stdio] RANK [--] CMD...``

Nothing here imports torch: torchrun runs as a subprocess, so only the workers pay for it.
"""
