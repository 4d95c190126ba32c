# The fixture workspace opened in VS Code is not part of the project's test suite.
collect_ignore_glob = ["workspace/*"]
