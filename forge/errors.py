"""The forge's error hierarchy."""


class ForgeError(Exception):
    """Base class of every error the forge package raises."""


class ConfigError(ForgeError):
    """Raised when a forge configuration (or a partial update of one) has an unknown field, a
    value of the wrong type or a value out of range; ``problems`` lists every one found."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


class LanguageModelError(ForgeError):
    """Raised when the language-model endpoint cannot be reached or answers out of format."""
