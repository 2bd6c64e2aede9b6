"""The tables commerce's CDC relay captures (`manage.py cdc --service commerce`) and their topics:
the change streams inventory, finance and taxation consume (spec 6.2). The message shapes are the
contract documented in docs/events.md ("Commerce change streams"); each message is keyed by the
row id, so one entity's changes stay in order."""

from merchant_platform.cdc import Capture
from merchant_platform.messaging.topics import CHANGE_STREAMS

CAPTURES = [
    Capture(topic=CHANGE_STREAMS["MERCHANT"].name, model="commerce.Merchant"),
    Capture(topic=CHANGE_STREAMS["PRODUCT"].name, model="commerce.Product"),
    Capture(topic=CHANGE_STREAMS["PRODUCT_VARIANT"].name, model="commerce.ProductVariant"),
]
