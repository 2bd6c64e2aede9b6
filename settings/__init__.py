"""Settings of Merchant Platform: a base module plus one module per concern, all read from the
environment (see docs/configuration.md). Production differs from development only by environment.

A service's module may declare `<SERVICE>_OPENAPI_SETTINGS` (drf-spectacular settings such as
ENUM_NAME_OVERRIDES); they are merged into SPECTACULAR_SETTINGS when that service is active, so a
process never names models it does not install."""

from settings.auth import *  # noqa: F403
from settings.base import *  # noqa: F403
from settings.base import with_service_openapi_settings
from settings.cache import *  # noqa: F403
from settings.commerce import *  # noqa: F403
from settings.database import *  # noqa: F403
from settings.finance import *  # noqa: F403
from settings.inventory import *  # noqa: F403
from settings.ledger import *  # noqa: F403
from settings.licensing import *  # noqa: F403
from settings.logging import *  # noqa: F403
from settings.messaging import *  # noqa: F403
from settings.outreach import *  # noqa: F403
from settings.payment import *  # noqa: F403
from settings.security import *  # noqa: F403
from settings.signal import *  # noqa: F403
from settings.taxation import *  # noqa: F403

SPECTACULAR_SETTINGS = with_service_openapi_settings(SPECTACULAR_SETTINGS, globals())
