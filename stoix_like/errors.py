"""Errors that a user can fix by changing the command line: reported in one line, before any long work."""


class ConfigError(ValueError):
    """The configuration asks for something that cannot run; the message says what to change."""
