"""AnimaWorks' `core` package as Python tools on this host see it: only `core.tools._base`."""
