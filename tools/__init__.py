"""Developer tools that are not part of the installed package: the generators of the
reference docs and the write-or-check routine every generator shares. Run from the
repository root, e.g. `python -m tools.reference --check`."""
