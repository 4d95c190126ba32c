# The fixture workspace opened in VS Code is not part of the project's test suite.
collect_ignore_glob = ["workspace/*"]


def pytest_configure(config):
    # tests/test_vscode_e2e.py is marked e2e; register the marker if the project does not.
    config.addinivalue_line("markers", "e2e: end-to-end tests (slow; need external toolchains)")
