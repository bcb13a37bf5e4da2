"""What every part of the master shares: infrastructure and the read model, no domain state.

* `MasterState` (_shared.py): store, event bus, loop, one transaction (`atomic`), long-poll
  change signals.
* `EventBus` (_events.py): the /events stream's fan-out.
* `Views` (_views.py): experiments, trials and metrics as API JSON; experiment/trial events.
* `_serialize`: rows as Determined's JSON, and `strict_dumps`/`strict_json_text`, the one
  encoder of API answers (non-finite floats as "NaN"/"Infinity"/"-Infinity");
  `_metric_format`: the shape of a metric report; `_auth`: token hashing and the principals a request acts as.
* `ReadPriority` (_priority.py): reads a person waits for go before report ingestion.
"""

from master_lite._core._auth import TrialPrincipal, UserPrincipal
from master_lite._core._events import EVENT_TYPES, EventBus
from master_lite._core._priority import ReadPriority
from master_lite._core._serialize import dumps as strict_dumps
from master_lite._core._serialize import strict_json_text
from master_lite._core._shared import MasterState, searcher_module
from master_lite._core._views import Views
from master_lite.store import MetricsQuery

__all__ = [
    "EVENT_TYPES",
    "EventBus",
    "MasterState",
    "MetricsQuery",
    "ReadPriority",
    "TrialPrincipal",
    "UserPrincipal",
    "Views",
    "searcher_module",
    "strict_dumps",
    "strict_json_text",
]
