"""Simplified Chinese catalog for posenc explain: English text (numbers as {0}, {1}, ...) ->
Chinese, in the terms of glossary.py."""

MESSAGES: dict[str, str] = {}
