"""The build's errors, apart from the build (_build.py) and its shared directory (build_cache.py),
which both raise them."""


class ExtensionBuildError(RuntimeError):
    """The fused_hmc extension could not be built or loaded; the message says what to install."""


class BuildLockTimeout(ExtensionBuildError):
    """Another process held a build directory's lock for longer than the timeout (build_cache)."""
