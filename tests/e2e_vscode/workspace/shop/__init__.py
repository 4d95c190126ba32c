"""A tiny shop: orders are placed by the service and saved by the repository."""
