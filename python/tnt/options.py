"""Keyword arguments as the trainer's run keys.

compile's and fit's options become run-file settings, "section.key=value" with a TOML value, read
by the trainer's own run configuration (Note [Run keys] in actors/trainer/src/run_config.h): a
key added there is a keyword argument here without further work, checked and explained as
tnt-train checks it. A key's keyword is its name where no other section has that name, else
"<section>_<name>" (data_seed, train_seed); [checkpoint]'s keys are "checkpoint_<name>" (but
resume), and a callback's "<callback>_<name>", its `enabled` the callback's name alone
(terminate_on_nan=False, early_stopping_patience=3).
"""

import json
import math
import numbers

from . import _tnt

_TYPES = {"str": str, "path": str, "bool": bool, "float": float, "int": int}


def _table():
    keys = _tnt.run_keys()
    count = {}
    for section, key, _, _ in keys:
        count[key] = count.get(key, 0) + 1
    table = {}
    for section, key, kind, help_text in keys:
        last = section.split(".")[-1]
        if section.startswith("callbacks."):
            name = last if key == "enabled" else f"{last}_{key}"
        elif section == "checkpoint" and key != "resume":
            name = f"checkpoint_{key}"
        else:
            name = key if count[key] == 1 else f"{last}_{key}"
        table[name] = (f"{section}.{key}", kind, help_text)
    return table


KEYS = _table()


def toml_value(value, kind, name):
    """`value` written as TOML for a key of `kind` (the types of run_keys); TypeError if it cannot be."""
    if kind.startswith("list["):
        if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
            raise TypeError(f"{name}: expected a list, got {value!r}")
        inner = kind[5:-1]
        return "[" + ", ".join(toml_value(v, inner, name) for v in value) + "]"
    if kind == "bool":
        if not isinstance(value, (bool,)) and type(value).__name__ != "bool_":
            raise TypeError(f"{name}: expected True or False, got {value!r}")
        return "true" if value else "false"
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"{name}: expected an integer, got {value!r}")
        return str(int(value))
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"{name}: expected a number, got {value!r}")
        value = float(value)
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if not isinstance(value, str):
        raise TypeError(f"{name}: expected a string, got {value!r}")
    return json.dumps(value)  # a TOML basic string: JSON's escapes are TOML's


def setting(path, value):
    """The setting of run key `path` ("section.key") to `value`."""
    for name, (key_path, kind, _) in KEYS.items():
        if key_path == path:
            return f"{path}={toml_value(value, kind, name)}"
    raise KeyError(path)


def settings_of(function, options, sections):
    """Settings for the keyword arguments `options` of `function` (its name, for messages); each
    must name a run key of one of `sections` (section names, or prefixes ending in '.')."""
    out = []
    for name, value in options.items():
        entry = KEYS.get(name)
        if entry is None or not any(entry[0].startswith(s + ".") for s in sections):
            raise TypeError(f"{function}() got an unexpected keyword argument '{name}' (Model.{function}_options() "
                            "lists the run keys it takes)")
        if value is None:
            continue
        out.append(f"{entry[0]}={toml_value(value, entry[1], name)}")
    return out


def describe(sections, leave_out=()):
    """The keyword arguments of `sections` with their run keys and help, one per line (not those
    of the run keys in `leave_out`)."""
    lines = []
    for name, (path, kind, help_text) in sorted(KEYS.items()):
        if any(path.startswith(s + ".") for s in sections) and path not in leave_out:
            lines.append(f"  {name} ({kind}; run key {path}){': ' + help_text if help_text else ''}")
    return "\n".join(lines)
