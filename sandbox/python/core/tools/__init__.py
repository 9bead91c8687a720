"""AnimaWorks' `core.tools` package as Python tools on this host see it: only `_base`."""
