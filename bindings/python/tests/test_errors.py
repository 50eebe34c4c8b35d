"""The exception classes map every error kind of the core, once."""

from __future__ import annotations

import lagless
from lagless import _errors, _lagless


def test_every_core_error_kind_has_its_exception_class_exported():
    kinds = _lagless._error_kinds()
    assert ("CONFIG" in {name for _, name in kinds}) and len(kinds) >= 15
    for code, name in kinds:
        cls = _errors._class_for(name)
        assert cls is not lagless.LaglessError, (
            f"no exception class for the core error kind {name} ({code}): add one to "
            f'lagless/_errors.py with kind = "{name}" and list it in its __all__'
        )
        assert cls.kind == name
        assert cls.__name__ in lagless.__all__ and getattr(lagless, cls.__name__) is cls
    # No class stands for a kind the core does not have.
    assert set(_errors._BY_KIND) == {name for _, name in kinds}


def test_an_unknown_kind_falls_back_to_the_root_class():
    assert _errors._class_for("NO_SUCH_KIND") is lagless.LaglessError

