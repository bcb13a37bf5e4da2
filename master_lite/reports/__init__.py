"""What trials report: metrics, progress, early exits, searcher operations (`Reports`), and the
log lines of runs and of the master (`TrialLogs`, written through `LogWriter`)."""

from master_lite.reports._logs import TrialLogs
from master_lite.reports._logwriter import LogWriter
from master_lite.reports._reporting import EARLY_EXIT_REASONS, Reports

__all__ = ["EARLY_EXIT_REASONS", "LogWriter", "Reports", "TrialLogs"]
