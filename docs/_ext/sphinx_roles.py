"""A griffe extension for the API reference: the package's docstrings use
Sphinx roles (:class:`Client`), which Markdown would show literally; render
them as inline code (`Client`), the way the rest of the docstrings read."""

import re

import griffe

_ROLE = re.compile(r":(?:class|meth|func|attr|exc|mod|data|obj):`~?([^`]+)`")


class SphinxRoles(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: object) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _ROLE.sub(r"`\1`", obj.docstring.value)
