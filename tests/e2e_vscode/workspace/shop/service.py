"""Placing orders."""

from shop.models import Order, Repository


class OrderService:
    def __init__(self) -> None:
        self.repository = Repository()

    def place_order(self, order_id: str, items: list[str]) -> Order:
        order = Order(order_id, list(items))
        self.repository.save(order)
        return order

    def find(self, order_id: str) -> Order | None:
        return self.repository.get(order_id)
