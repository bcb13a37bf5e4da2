"""`%det attach ID --console` forwards each finished cell to the trial's kernel; a block still
being typed stays in the console (so Enter asks for its next line instead of sending half a
loop to the trial). The forwarding itself runs in tests/browser/test_kernel_attach_e2e.py."""

from __future__ import annotations

import pytest

from jupyter_determined.kernel._attach_console import _complete


@pytest.mark.parametrize(
    ("code", "complete"),
    [
        ("for i in range(3):\n", False),
        ("if step > 10:\n    print(step)\n    if stop:\n", False),
        ("print('STEP', step)\n", True),
        ("stop = True\n", True),
        ("def f():\n    return 1\n", True),
        ("%debug\n", True),  # a magic: the trial's kernel runs it
        ("print(\n", False),
        ("1 +* 2\n", True),  # a syntax error: the trial's kernel reports it
    ],
)
def test_only_finished_cells_are_forwarded(code: str, complete: bool) -> None:
    assert _complete(code) is complete
