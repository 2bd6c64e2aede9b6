"""Settings of Merchant Platform: a base module plus one module per concern, all read from the
environment (see docs/configuration.md). Production differs from development only by environment."""

from settings.auth import *  # noqa: F403
from settings.base import *  # noqa: F403
from settings.cache import *  # noqa: F403
from settings.database import *  # noqa: F403
from settings.licensing import *  # noqa: F403
from settings.logging import *  # noqa: F403
from settings.messaging import *  # noqa: F403
from settings.outreach import *  # noqa: F403
from settings.security import *  # noqa: F403
