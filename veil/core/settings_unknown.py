"""Unknown settings keys, explained: a ``settings.json`` key or a ``VEIL_<SECTION>__...``
variable that names a section or field nobody registers.

pydantic's answer to an unknown key is ``Extra inputs are not permitted``, which reads as a
syntax problem; the likely causes are a plugin that was uninstalled (its section stays in the
file) and a typo. So the messages say which: a section no installed plugin registers (with
the known sections), or a field the section does not have, each with the closest known names
(``difflib.get_close_matches``, the standard library's fuzzy matcher; cutoff 0.6, its
default). And pydantic-settings reads only the variables of sections it knows, so
``VEIL_GREETER__REPEAT`` and ``VEIL_COMPACTOIN__THRESHOLD`` were ignored without a word while the
same typo in the file was refused: :func:`check_env_sections` refuses them too.

Only the double-underscore form is a settings variable: ``VEIL_HOME``, ``VEIL_DEBUG``,
``VEIL_DISABLE_PLUGINS``, ``VEIL_HTTP_TOKEN``... are other variables veil reads, and a
top-level setting (``VEIL_DEFAULT_AGENT``) has no ``__``.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from veil.core.errors import ConfigError


def field_keys(model: type[BaseModel]) -> list[str]:
    """The keys ``model`` accepts in a settings file: each field's alias (camelCase), else its
    name, in declaration order."""
    return [f.alias or name for name, f in model.model_fields.items()]


def _field(model: type[BaseModel], key: str) -> Any:
    """The field of ``model`` whose alias or name is ``key`` (the file gives aliases, the
    environment names), or None."""
    for name, f in model.model_fields.items():
        if key in (name, f.alias):
            return f
    return None


def _submodel(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """``(model, keyed)``: the pydantic model a field holds, and whether it holds a dict of
    them (``providers: dict[str, Provider]``: the next key is a dict key, not a field)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    args = getattr(annotation, "__args__", ())
    models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
    if len(models) != 1:
        return None, False
    keyed = getattr(annotation, "__origin__", None) is dict
    if not keyed:  # Model | None
        return models[0], False
    return models[0], True


def model_at(model: type[BaseModel], path: Sequence[Any]) -> type[BaseModel] | None:
    """The model that validates the object at ``path`` (keys from the root ``model``), or None
    when the path leaves models (a plain dict, a list)."""
    current: type[BaseModel] | None = model
    keys = list(path)
    while keys:
        if current is None:
            return None
        f = _field(current, str(keys.pop(0)))
        if f is None:
            return None
        current, keyed = _submodel(f.annotation)
        if keyed:
            if not keys:
                return None
            keys.pop(0)
    return current


def _close(key: str, known: Sequence[str]) -> list[str]:
    """Known keys close to ``key``, compared without case (``VEIL_`` variables are upper case)."""
    by_lower = {k.lower(): k for k in known}
    return [by_lower[m] for m in difflib.get_close_matches(key.lower(), list(by_lower), n=2)]


def _did_you_mean(close: Sequence[str]) -> str:
    return f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""


def unknown_key_message(
    model: type[BaseModel], loc: Sequence[Any], *, env: bool = False
) -> str | None:
    """What to say of an unknown key at ``loc`` (pydantic's ``extra_forbidden`` error) in
    settings validated by ``model``: for a top-level key, ``no installed plugin registers this
    section (known sections: ...)``; deeper, ``no such field in SECTION (did you mean ...?
    fields: ...)``, the fields by their settings.json names, or with ``env`` (the key came
    from a ``VEIL_*`` variable) by their names, the suggestion as the variable to set
    (``VEIL_COMPACTION__THRESHOLD``). None when ``loc`` cannot be followed through the
    models."""
    if not loc:
        return None
    parent = model_at(model, loc[:-1])
    if parent is None:
        return None
    known = list(parent.model_fields) if env else field_keys(parent)
    key = str(loc[-1])
    close = _close(key, known)
    if env and len(loc) > 1:
        prefix = "VEIL_" + "__".join(str(p) for p in loc[:-1]).upper() + "__"
        close = [prefix + c.upper() for c in close]
    if len(loc) == 1:
        sections = [
            f.alias or n for n, f in parent.model_fields.items() if _submodel(f.annotation)[0]
        ]
        return (
            f"no installed plugin registers this section ({_did_you_mean(close)}known "
            f"sections: {', '.join(sorted(sections))})"
        )
    where = ".".join(str(p) for p in loc[:-1])
    return f"no such field in {where} ({_did_you_mean(close)}fields: {', '.join(known)})"


def check_env_sections(environ: Mapping[str, str], model: type[BaseModel]) -> None:
    """Refuse ``VEIL_<SECTION>__...`` variables whose SECTION is not a section of ``model``:
    pydantic-settings reads only the known sections' variables, so these were ignored without
    a word (a typo, or the section of an uninstalled plugin). Empty variables are left alone,
    as pydantic-settings leaves them.

    Args:
        environ: the environment (``os.environ``).
        model: the settings class with the plugins' sections.

    Raises:
        ConfigError: ``environment: VEIL_X__Y: no installed plugin registers the settings
            section 'x' (did you mean ...? known sections: ...)``, for the first such variable
            in name order.
    """
    sections = [name for name, f in model.model_fields.items() if _submodel(f.annotation)[0]]
    for variable in sorted(environ):
        upper = variable.upper()
        if not upper.startswith("VEIL_") or "__" not in upper or not environ[variable]:
            continue
        section = upper[len("VEIL_") :].split("__", 1)[0].lower()
        if section in sections:
            continue
        close = [f"VEIL_{c.upper()}__" for c in _close(section, sections)]
        raise ConfigError(
            f"environment: {variable}: no installed plugin registers the settings section "
            f"{section!r} ({_did_you_mean(close)}known sections: {', '.join(sorted(sections))})"
        )
