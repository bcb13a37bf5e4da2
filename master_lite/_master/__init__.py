"""The master: the facade every API handler calls (`Master`, _facade.py) and the building and
wiring of its parts (`build_parts`, _wiring.py)."""

from master_lite._master._facade import Master
from master_lite._master._wiring import Parts, build_parts

__all__ = ["Master", "Parts", "build_parts"]
