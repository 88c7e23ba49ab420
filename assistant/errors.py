"""Errors: a small hierarchy whose messages tell the user what happened and what to do.

Stages raise these; only the edges (CLI exit codes, Gradio messages) convert them.
"""


class AssistantError(Exception):
    """Base class: every error the assistant raises on purpose."""


class CorpusError(AssistantError):
    """A corpus file is missing, unreadable or malformed (the message names file and line)."""


class IndexMissingError(AssistantError):
    """No index has been built yet."""


class IndexMismatchError(AssistantError):
    """The index was built with another embedding model or from another corpus."""


class StoreUnavailableError(AssistantError):
    """The store cannot be used now: the Chroma server is unreachable, or another process is updating it."""


class StoreDamagedError(AssistantError):
    """The embedded store's files are damaged; the message names the folder and the rebuild that fixes it."""


class ModelError(AssistantError):
    """A local model (embedding or LLM weights) is missing or fails its checksum."""


class QuestionError(AssistantError):
    """The question itself is unusable (empty, for instance)."""


class LLMError(AssistantError):
    """The language model could not produce an answer."""


class LLMUnavailableError(LLMError):
    """The LLM server is down or cannot be started."""


class LLMTimeoutError(LLMError):
    """The LLM server did not answer within the configured timeout."""
