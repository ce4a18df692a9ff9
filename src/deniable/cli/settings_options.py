"""Command-line flags for collector settings, derived from the collector's ``Settings``.

``Settings`` owns the collector's configuration: each flag made here takes its type, bounds,
help text and default from the settings field it sets, and a flag left out leaves the field to
``Settings`` itself (its ``DENIABLE_*`` variable, else its default). Nothing about a setting is
restated in the CLI but the flag's spelling and metavar.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, get_args

import annotated_types
import click
from pydantic import SecretStr, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from deniable.client.errors import InvalidInput
from deniable.collector.settings import TOKEN_FILES, Settings, settings_problem

F = TypeVar("F", bound=Callable[..., Any])

ENV_PREFIX: str = Settings.model_config.get("env_prefix") or ""
"""What the settings' environment variables start with (``DENIABLE_``)."""


def environment_variable(field: str) -> str:
    """The environment variable that sets the settings field ``field``."""
    return f"{ENV_PREFIX}{field.upper()}"


def _field(name: str) -> FieldInfo:
    """The settings field ``name``; a programming error if there is none."""
    return Settings.model_fields[name]


def _value_type(field: FieldInfo) -> object:
    """The field's type without ``| None`` (a class, or a typing form such as ``Literal``)."""
    kinds = [kind for kind in get_args(field.annotation) if kind is not type(None)]
    return kinds[0] if kinds else field.annotation


BOUND_ATTRIBUTES = {
    annotated_types.Ge: "ge",
    annotated_types.Gt: "gt",
    annotated_types.Le: "le",
    annotated_types.Lt: "lt",
}
"""The numeric constraints a settings field may carry, and the attribute holding each bound."""


def _bounds(field: FieldInfo) -> dict[str, Any]:
    """The field's numeric bounds by kind, such as ``{"ge": 1, "le": 1000}``."""
    found: dict[str, Any] = {}
    for constraint in field.metadata:
        attribute = BOUND_ATTRIBUTES.get(type(constraint))
        if attribute is not None:
            found[attribute] = getattr(constraint, attribute)
    return found


def _click_type(field: FieldInfo) -> click.ParamType:
    """The click type checking what the field accepts (its bounds included)."""
    kind = _value_type(field)
    if kind in (int, float):
        bounds = _bounds(field)
        numbers = click.IntRange if kind is int else click.FloatRange
        return numbers(
            min=bounds.get("ge", bounds.get("gt")),
            max=bounds.get("le", bounds.get("lt")),
            min_open="gt" in bounds,
            max_open="lt" in bounds,
        )
    if kind is Path:
        return click.Path(dir_okay=False)
    return click.STRING


def settings_option(
    name: str, flag: str | None = None, metavar: str | None = None
) -> Callable[[F], F]:
    """A flag (default ``--field-name``) setting the settings field ``name``, with the field's
    type, bounds, description and default; see :func:`settings_from_command_line`."""
    field = _field(name)
    described = (field.description or name.replace("_", " ")).removesuffix(".")
    return click.option(
        flag or "--" + name.replace("_", "-"),
        name,
        type=_click_type(field),
        metavar=metavar,
        default=None if field.default is PydanticUndefined else field.default,
        show_default=field.default is not None,
        help=f"{described} (env {environment_variable(name)}).",
    )


def secret_fields() -> tuple[str, ...]:
    """The settings fields that hold secrets (tokens and keys)."""
    return tuple(
        name for name, field in Settings.model_fields.items() if _value_type(field) is SecretStr
    )


def warn_about_visible_secrets(context: click.Context) -> None:
    """Warn on stderr for each secret given as a flag: any user of the host sees it in ``ps``."""
    files = {token: file for file, token in TOKEN_FILES.items()}
    for name in secret_fields():
        if name not in context.params:
            continue
        if context.get_parameter_source(name) is not click.core.ParameterSource.COMMANDLINE:
            continue
        flag = "--" + name.replace("_", "-")
        instead = f"{flag}-file or " if name in files else ""
        click.echo(
            f"warning: {flag} is visible to every user of this host (ps, /proc);"
            f" prefer {instead}the environment variable {environment_variable(name)}",
            err=True,
        )


def settings_from_command_line(context: click.Context) -> Settings:
    """The collector's settings: the settings flags given on the command line over the
    environment and the defaults (a flag left out leaves its field to ``Settings``).

    Raises :class:`InvalidInput` naming each invalid setting, never its value.
    """
    given = {
        name: value
        for name, value in context.params.items()
        if name in Settings.model_fields
        and context.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE
    }
    try:
        return Settings(**given)
    except ValidationError as exc:
        raise InvalidInput(settings_problem(exc)) from None
