"""`from core.tools._base import get_credential`, as in AnimaWorks, over the host's credential capability.

The host resolves the credential for the Anima of the call, in AnimaWorks' order (config.json, the
vault, shared/credentials.json, the environment variable) and names what is missing; a tool never
reads another Anima's credentials, whatever it asks for.
"""

from __future__ import annotations

import logging

logger = logging.getLogger("animaworks.tools")


class ToolConfigError(Exception):
    """A tool's configuration (a credential, a setting) is missing or wrong: the operator must act."""


def get_credential(credential_name: str, tool_name: str, key_name: str = "api_key", env_var: str | None = None) -> str:
    import _animaworks_host
    from _animaworks_runtime import HostError, wait

    try:
        return str(wait(_animaworks_host.get_credential(credential_name, tool_name, key_name, env_var)))
    except HostError as error:
        if error.type == "ToolConfigError":
            raised = ToolConfigError(str(error))
            raised._js_error = error._js_error  # type: ignore[attr-defined]
            raise raised from None
        raise
