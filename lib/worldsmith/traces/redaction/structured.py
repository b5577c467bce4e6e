"""Which JSON fields hold a person's name or phone number, by their key and their object's other keys.

`first_name`, `last_name`, `full_name`, `customer_name`, ... always do; a bare `name` does in an object that
is about a person (it has an e-mail or phone field, or sits under `customer`, `user`, `passenger`, ...), and
`first` / `last` do inside a `name` object (`"name": {"first": "Ada", "last": "Lovelace"}`); a list under
`attendees`, `participants`, `recipients`, ... holds names (or addresses). A key naming a phone
(`phone`, `mobile`, `phone_number`, `fax`, ...) holds a phone number whatever its written form.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from functools import lru_cache
from typing import Literal

__all__ = ["FieldKind", "field_kind", "list_kind", "normalised_key", "person_object"]

FieldKind = Literal["first", "last", "full", "phone"]

_FIRST = frozenset({"firstname", "givenname", "forename", "middlename", "nickname"})
_LAST = frozenset({"lastname", "surname", "familyname", "maidenname"})
_FULL = frozenset({
    "fullname", "customername", "contactname", "recipientname", "sendername", "passengername", "personname",
    "employeename", "ownername", "authorname", "guestname", "patientname", "clientname", "cardholder",
    "cardholdername", "holdername", "accountholder", "accountholdername", "billingname", "shippingname",
    "travelername", "travellername", "membername", "displayname", "realname", "legalname",
})
_PHONE = re.compile(r"^(phone|mobile|cell|cellphone|telephone|tel|fax|phonenumber|mobilenumber|contactnumber|"
                    r".*phone(number)?)$")
_PERSON_PARENTS = frozenset({
    "customer", "user", "passenger", "contact", "recipient", "sender", "author", "owner", "employee", "person",
    "guest", "patient", "client", "member", "traveler", "traveller", "cardholder", "driver", "attendee",
    "participant", "buyer", "seller", "payer", "payee", "manager", "assignee", "reporter", "organizer",
    "organiser", "from", "to", "profile", "account", "requester", "applicant", "student", "teacher", "doctor",
})
_PERSON_LISTS = frozenset({
    "attendees", "participants", "recipients", "cc", "bcc", "members", "passengers", "guests", "authors",
    "invitees", "contacts", "people", "persons", "travelers", "travellers", "assignees", "reviewers",
})
_PERSON_SIGNS = frozenset({"email", "emailaddress", "phone", "phonenumber", "mobile", "firstname", "lastname",
                           "dateofbirth", "dob", "birthday", "birthdate"})
_NAME_PARTS = {"first": "first", "given": "first", "middle": "first", "last": "last", "family": "last"}


@lru_cache(maxsize=65_536)
def normalised_key(key: str) -> str:
    """`First-Name`, `first_name` and `firstName` all read `firstname`."""
    return re.sub(r"[\s_\-.]", "", key).lower()


def person_object(keys: Collection[str], parent: str | None) -> bool:
    """An object about a person: one of its keys is a personal field, or its parent key names a person."""
    return (parent is not None and normalised_key(parent) in _PERSON_PARENTS) or any(
        normalised_key(key) in _PERSON_SIGNS for key in keys
    )


@lru_cache(maxsize=65_536)
def field_kind(key: str, parent: str | None, person: bool) -> FieldKind | None:
    """What the string under `key` holds, in an object under `parent` (`person`: `person_object` of it)."""
    normal = normalised_key(key)
    if normal in _FIRST:
        return "first"
    if normal in _LAST:
        return "last"
    if normal in _FULL or (person and normal == "name"):
        return "full"
    if parent is not None and normalised_key(parent) == "name" and normal in _NAME_PARTS:
        return "first" if _NAME_PARTS[normal] == "first" else "last"
    if _PHONE.match(normal):
        return "phone"
    return None


def list_kind(parent: str | None) -> FieldKind | None:
    """What the strings of a list under `parent` hold."""
    return "full" if parent is not None and normalised_key(parent) in _PERSON_LISTS else None
