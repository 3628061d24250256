"""Keyword arguments of the Python API, read by the command line's own parser.

``planner.optimize('llama3-8b', budget='64gpus', seq_len=4096)`` is parsed exactly as
``planner optimize llama3-8b --budget 64gpus --seq-len 4096``: each keyword becomes the option
of the same name (``seq_len`` is ``--seq-len``) and the command's Click parser converts and
checks it. So the API accepts every option the command has, including ones added later, with
the command's defaults, and a bad keyword or value raises :class:`~planner.errors.BadInput` with
the command's one-line message (``No such option '--sequence-len'.``).
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Mapping
from enum import Enum
from functools import lru_cache
from pathlib import PurePath

from planner.errors import BadInput

# Options that shape what the command prints, not what it computes: the API returns values.
PRINT_ONLY = ("format",)


@lru_cache(maxsize=1)
def _commands() -> dict:
    """The Click commands of the `planner` app, with the declared axes' options on optimize and
    pareto (as :func:`planner.cli.main` gives them)."""
    import typer

    import planner.cli  # noqa: F401  (registers every command on the app)
    from planner.cli.app import app
    from planner.cli.optimize import add_axis_options

    add_axis_options()
    return dict(typer.main.get_command(app).commands)


def _text(value) -> str:
    """One value as the command line would spell it."""
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, float):
        return repr(value)  # exact: repr round-trips a float
    if isinstance(value, list | tuple | set | frozenset):
        return ",".join(_text(v) for v in value)
    if isinstance(value, str | int | PurePath):
        return str(value)
    raise BadInput(f"a value of type {type(value).__name__} ({value!r}) is not an option value")


def _values(option, value) -> list[str]:
    """The texts of one option: several for a repeatable option (``budget=['64gpus', '$500']``,
    ``price={'H100_SXM': 2.49}``), one otherwise (a list joined by commas: ``gpu=['A100', 'H100']``)."""
    if option.multiple:
        if isinstance(value, Mapping):
            return [f"{k}={_text(v)}" for k, v in value.items()]
        if isinstance(value, list | tuple):
            return [_text(v) for v in value]
    return [_text(value)]


def _flag(option, value) -> list[str]:
    """A switch (``pipeline=True`` is ``--pipeline``, False ``--no-pipeline`` or the default)."""
    name = option.opts[0]
    if not isinstance(value, bool):
        raise BadInput(f"{name} is a switch: give True or False, got {value!r}")
    if value:
        return [name]
    return option.secondary_opts[:1]  # a switch without an off form is off by default


def argv(command, options: Mapping[str, object]) -> list[str]:
    """The command-line words of ``options`` (keyword -> value) for a Click ``command``.
    None means the option's default. An unknown keyword stays in, so the parser names it."""
    known = {p.name: p for p in command.params if p.opts and p.opts[0].startswith("--")}
    words: list[str] = []
    for key, value in options.items():
        option = known.get(key)
        if key in PRINT_ONLY or key == "help":
            raise BadInput(f"--{key.replace('_', '-')} is an option of the command line only")
        if option is None:
            words.append("--" + key.replace("_", "-"))  # "No such option: --x" from the parser
        elif value is None:
            continue
        elif option.is_flag:
            words += _flag(option, value)
        else:
            words += [f"{option.opts[0]}={text}" for text in _values(option, value)]
    return words


def names(command: str) -> set[str]:
    """The keyword names of a command's options (``seq_len`` for ``--seq-len``)."""
    return {p.name for p in _commands()[command].params}


def parse(command: str, arguments: list[str], options: Mapping[str, object]) -> dict:
    """``options`` parsed as `planner <command> <arguments> <options>` would be: the parameters
    its function receives, with the command's defaults. Raises :class:`BadInput` with the
    parser's message for an unknown option or a value of the wrong form."""
    try:  # recent Typer vendors Click
        from typer._click.exceptions import UsageError
    except ImportError:  # pragma: no cover - older Typer on top of Click
        from click.exceptions import UsageError

    cmd = _commands()[command]
    try:
        ctx = cmd.make_context(f"planner {command}", [*argv(cmd, options), "--", *arguments])
    except UsageError as exc:
        raise BadInput(exc.format_message()) from None
    return _typed(cmd, ctx.params)


def _enum(annotation) -> type[Enum] | None:
    """The Enum of a parameter annotated ``Annotated[E, ...]``, ``E | None`` or ``E``."""
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    for t in typing.get_args(annotation) or (annotation,):
        if isinstance(t, type) and issubclass(t, Enum):
            return t
    return None


def _typed(cmd, params: dict) -> dict:
    """The parsed values as the command's function receives them: Typer turns choice texts into
    the parameters' Enums when it calls the function; the API does the same here."""
    signature = inspect.signature(inspect.unwrap(cmd.callback), eval_str=True)
    out = dict(params)
    for name, parameter in signature.parameters.items():
        enum = _enum(parameter.annotation)
        if enum is not None and isinstance(out.get(name), str):
            out[name] = enum(out[name])
    return out


_KIND = {int: "integer", float: "float", str: "text", bool: "boolean"}


def _field_value(name: str, kind, value):
    """``value`` for a request field of type ``kind`` (a field without a command-line option),
    checked as the parser checks an option of that type."""
    args = typing.get_args(kind) or (kind,)
    if value is None and type(None) in args:
        return None
    if typing.get_origin(kind) is tuple:
        return tuple(_text(v) for v in (value if isinstance(value, list | tuple) else [value]))
    base = next(t for t in args if t is not type(None))
    if base is str and not isinstance(value, bool):
        return _text(value)
    return _scalar(name, base, value)


def _scalar(name: str, base: type, value):
    """A number or switch field: ints stay whole (2.5 is no integer), a switch takes a bool."""
    try:
        if base is bool:
            if not isinstance(value, bool):
                raise ValueError
            return value
        if isinstance(value, bool) or (base is int and isinstance(value, float)):
            raise ValueError
        return base(value)
    except (TypeError, ValueError):
        option = "--" + name.replace("_", "-")
        kind = _KIND.get(base, base.__name__)
        raise BadInput(f"Invalid value for '{option}': {value!r} is not a valid {kind}.") from None


def request_fields(cls, options: Mapping[str, object]) -> dict:
    """``options`` as values of the fields of the request dataclass ``cls`` they name (fields the
    command has no option for yet are reachable from the API), typed as the fields declare."""
    hints = typing.get_type_hints(cls)
    return {k: _field_value(k, hints[k], v) for k, v in options.items()}
