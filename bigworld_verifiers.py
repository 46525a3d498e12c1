"""verifiers' name for bigworld's environment (``vf-eval bigworld-verifiers ...``).

verifiers finds a taskset by a top-level module name, so this module re-exports
:mod:`agents.verifiers_env`, where the environment lives.
"""

from agents.verifiers_env import BigWorldEnv, BigWorldTaskset, load_environment

__all__ = ["BigWorldEnv", "BigWorldTaskset", "load_environment"]
