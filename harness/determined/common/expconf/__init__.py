"""The experiment config: load, validate, expand with defaults, override.

Typical use::

    config = expconf.load_file("exp.yaml")
    config = expconf.apply_overrides(config, ["searcher.max_trials=8"])
    expconf.check(config)                       # raises InvalidConfig listing every error
    expanded = expconf.apply_defaults(config)   # what the master stores and trials receive

jsonschema and yaml are imported on first use, so importing this package is cheap.
"""

from determined.common.expconf._access import (
    environment_variables,
    is_legacy_trial_entrypoint,
    length_of,
    searcher_metric,
)
from determined.common.expconf._defaults import DEFAULT_NAME, apply_defaults
from determined.common.expconf._errors import InvalidConfig
from determined.common.expconf._hparams import hparam_leaves, is_typed_hparam, normalize_hparams
from determined.common.expconf._lengths import (
    LengthError,
    batches_per_epoch,
    batches_to_units,
    length_to_batches,
    operation_unit,
    records_to_batches,
    unit_to_batches,
)
from determined.common.expconf._load import load, load_file
from determined.common.expconf._overrides import apply_overrides
from determined.common.expconf._schema import (
    CHECKPOINT_STORAGE_TYPES,
    HPARAM_TYPES,
    LENGTH_UNITS,
    MAX_SEED,
    SCHEMA,
    SEARCHER_NAMES,
)
from determined.common.expconf._test_mode import sample_hparam_specs, test_mode_config
from determined.common.expconf._validate import (
    check,
    import_jsonschema,
    prepare_validator,
    validate,
)
from determined.common.expconf._warnings import warnings

__all__ = [
    "CHECKPOINT_STORAGE_TYPES",
    "DEFAULT_NAME",
    "HPARAM_TYPES",
    "LENGTH_UNITS",
    "MAX_SEED",
    "SCHEMA",
    "SEARCHER_NAMES",
    "InvalidConfig",
    "apply_defaults",
    "apply_overrides",
    "check",
    "environment_variables",
    "hparam_leaves",
    "import_jsonschema",
    "is_legacy_trial_entrypoint",
    "is_typed_hparam",
    "length_of",
    "LengthError",
    "batches_per_epoch",
    "batches_to_units",
    "length_to_batches",
    "operation_unit",
    "records_to_batches",
    "unit_to_batches",
    "load",
    "load_file",
    "normalize_hparams",
    "prepare_validator",
    "sample_hparam_specs",
    "searcher_metric",
    "test_mode_config",
    "validate",
    "warnings",
]
