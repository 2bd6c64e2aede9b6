"""ISO 4217 currencies and their minor units (the number of decimal digits of one minor unit).

Amounts travel as integers of minor units (docs/architecture.md section 10), so rounding "to the minor
unit" is rounding to a whole number of them whatever the exponent; the exponent tells a client how
to display the amounts, and `major` renders one exactly."""

from __future__ import annotations

from decimal import Decimal

ZERO_DIGITS = "BIF CLP DJF GNF ISK JPY KMF KRW PYG RWF UGX UYI VND VUV XAF XOF XPF"
THREE_DIGITS = "BHD IQD JOD KWD LYD OMR TND"
FOUR_DIGITS = "CLF UYW"
TWO_DIGITS = (
    "AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BMD BND BOB BOV BRL BSD BTN BWP BYN BZD "
    "CAD CDF CHE CHF CHW CNY COP COU CRC CUP CVE CZK DKK DOP DZD EGP ERN ETB EUR FJD FKP GBP GEL GHS "
    "GIP GMD GTQ GYD HKD HNL HTG HUF IDR ILS INR IRR JMD KES KGS KHR KPW KYD KZT LAK LBP LKR LRD LSL "
    "MAD MDL MGA MKD MMK MNT MOP MRU MUR MVR MWK MXN MXV MYR MZN NAD NGN NIO NOK NPR NZD PAB PEN PGK "
    "PHP PKR PLN QAR RON RSD RUB SAR SBD SCR SDG SEK SGD SHP SLE SOS SRD SSP STN SVC SYP SZL THB TJS "
    "TMT TOP TRY TTD TWD TZS UAH USD USN UYU UZS VED VES WST XCD XCG YER ZAR ZMW ZWG"
)

MINOR_DIGITS: dict[str, int] = {
    **dict.fromkeys(TWO_DIGITS.split(), 2),
    **dict.fromkeys(ZERO_DIGITS.split(), 0),
    **dict.fromkeys(THREE_DIGITS.split(), 3),
    **dict.fromkeys(FOUR_DIGITS.split(), 4),
}


def minor_digits(currency: str) -> int:
    """The currency's exponent; KeyError for a code that is not an active ISO 4217 currency."""
    return MINOR_DIGITS[currency]


def major(amount: int, currency: str) -> str:
    """`amount` minor units as an exact decimal string of major units: 1234 USD -> "12.34"."""
    return str(Decimal(amount).scaleb(-minor_digits(currency)))
