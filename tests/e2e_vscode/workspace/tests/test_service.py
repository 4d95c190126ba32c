from shop.service import OrderService


def test_place_order_saves_it():
    service = OrderService()
    order = service.place_order("o-1", ["apple", "pear"])
    assert service.find("o-1") is order
    assert order.total_items() == 2
