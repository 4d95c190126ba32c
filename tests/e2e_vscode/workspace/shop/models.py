"""Domain objects and their storage."""

from dataclasses import dataclass, field


@dataclass
class Order:
    order_id: str
    items: list[str] = field(default_factory=list)

    def total_items(self) -> int:
        return len(self.items)


class Repository:
    """Keeps orders in memory."""

    def __init__(self) -> None:
        self.orders: dict[str, Order] = {}

    def save(self, order: Order) -> None:
        self.orders[order.order_id] = order

    def get(self, order_id: str) -> Order | None:
        return self.orders.get(order_id)
