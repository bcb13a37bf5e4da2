"""One contract across Python and TypeScript (scripts/gen_ts_contract.py).

The labextension's API types and shared constants are generated from the master's OpenAPI
document and `jupyter_determined._contract`; these tests fail when the checked-in file is stale,
or when a shared value is written by hand again on either side.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from jupyter_determined import _contract

REPO = Path(__file__).resolve().parents[2]
SOURCES = REPO / "labextension" / "src"
GENERATED = SOURCES / "api" / "contract.generated.ts"


def _generator():
    spec = importlib.util.spec_from_file_location(
        "gen_ts_contract", REPO / "scripts" / "gen_ts_contract.py"
    )
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def test_the_checked_in_typescript_contract_is_what_the_generator_writes_now() -> None:
    assert GENERATED.read_text() == _generator().render(), (
        "labextension/src/api/contract.generated.ts is stale: run "
        "`python scripts/gen_ts_contract.py` and commit it"
    )


def test_every_schema_of_the_served_document_has_its_typescript_interface() -> None:
    from master_lite.api import ROUTES, build_document

    schemas = build_document(ROUTES)["components"]["schemas"]
    text = GENERATED.read_text()
    for name in schemas:
        assert f"export interface Api{name} " in text
    # ... with the fields the master documents (a sample the widget reads).
    trial = text[text.index("export interface ApiTrial ") :]
    assert (
        "  notebook_error?: {" in trial
        and "  run_state?: 'QUEUED' | 'RUNNING' | 'STOPPING' | null;" in trial
    )


def test_shared_values_are_written_once_in_each_language() -> None:
    text = GENERATED.read_text()
    for name in _contract.__all__:
        assert re.search(rf"^export const {name} = ", text, re.M), name
    # No TypeScript source but the generated one spells a shared string value.
    values = [
        value
        for name in _contract.__all__
        if isinstance(value := getattr(_contract, name), str) and len(value) > 8
    ]
    for path in SOURCES.rglob("*.ts"):
        if path == GENERATED:
            continue
        source = path.read_text()
        for value in values:
            assert f"'{value}'" not in source, f"{path.relative_to(REPO)} spells {value!r}"
    # Python: the widget and the exporter use the contract's values.
    from jupyter_determined.kernel import _export, _widget

    assert _widget.MIME_TYPE is _contract.EXPERIMENT_MIME_TYPE
    assert _export.COMM_TARGET is _contract.NOTEBOOK_COMM_TARGET
    assert _export.SKIP_TAG is _contract.SKIP_TAG
