"""`param_label`: a parameter's label for its config key ("Codex config" for `codex_config`),
so a message about a field names it as the form does; other names (a stage position, the
profile) come back as they are."""

from __future__ import annotations

from django import template

from ctxsim.pipeline.params import PARAMS, env_var_of

register = template.Library()


@register.filter
def param_label(name: str) -> str:
    base = name.split(".", 1)[0]
    if env_var_of(name) is not None:
        return "ChatCLI environment"
    spec = PARAMS.get(base)
    return spec.label if spec is not None else name
