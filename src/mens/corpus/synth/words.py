"""Word lists for synthetic Vox programs: domains x entities x typed fields, plus the small
vocabularies (verbs, sample strings, cron lines, prompt phrasings) the templates draw from.

Every name here must be a legal Vox identifier that is not a keyword, so a template can never
produce a program that fails only because of an unlucky word; `_check_words()` enforces that at
import time."""

from __future__ import annotations

import re
from dataclasses import dataclass

# Reserved and contextual words of vox-syntax.md §1: never used as a name, so no template can
# trip over a soft keyword in an unexpected position.
RESERVED = frozenset("""
fn let async mut if else while loop break continue match when fetching empty for in to return
type dec import extern actor workflow activity side_effect spawn http pub with on state derived
effect mount cleanup view component agent migrate env and or not is isnt true false fragment
routes url state_machine partial terminal from any as rust react uses key style raw_css field
on_submit loader pending kind fallback version error not_found depends_on required optional
hidden label pattern max_len min_len range default success_redirect error_message color light
dark spacing radius shadow font family db
""".split())


@dataclass(frozen=True)
class Field:
    name: str
    type: str  # str | int | bool | float

    @property
    def words(self) -> str:
        return self.name.replace("_", " ")


@dataclass(frozen=True)
class Entity:
    domain: str
    type_name: str  # TYPEIDENT, e.g. "Book"
    var: str        # singular variable, e.g. "book"
    plural: str     # e.g. "books"
    fields: tuple[Field, ...]

    def of(self, *types: str) -> list[Field]:
        return [f for f in self.fields if f.type in types]

    @property
    def words(self) -> str:
        return self.var.replace("_", " ")

    @property
    def a(self) -> str:
        """The singular with its article: "a book", "an exhibit"."""
        return f"{an(self.words)} {self.words}"

    @property
    def plural_words(self) -> str:
        return self.plural.replace("_", " ")


def an(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def _entity(domain: str, type_name: str, var: str, plural: str, spec: str) -> Entity:
    fields = tuple(Field(*item.split(":")) for item in spec.split())
    return Entity(domain, type_name, var, plural, fields)


# Each entity has at least one str, one int and one other field so every template can run on it.
ENTITIES: tuple[Entity, ...] = (
    _entity("library", "Book", "book", "books", "title:str author:str pages:int year:int available:bool"),
    _entity("shop", "Product", "product", "products", "name:str sku:str price:int stock:int featured:bool"),
    _entity("clinic", "Patient", "patient", "patients", "name:str ward:str age:int visits:int insured:bool"),
    _entity("fleet", "Vehicle", "vehicle", "vehicles", "plate:str driver:str mileage:int seats:int electric:bool"),
    _entity("school", "Student", "student", "students", "name:str cohort:str grade:int credits:int enrolled:bool"),
    _entity("kitchen", "Dish", "dish", "dishes", "name:str cuisine:str calories:int price:int vegan:bool"),
    _entity("hotel", "Room", "room", "rooms", "code:str wing:str floor:int rate:int occupied:bool"),
    _entity("gym", "Member", "member", "members", "name:str plan:str visits:int age:int active:bool"),
    _entity("events", "Ticket", "ticket", "tickets", "code:str seat:str price:int row_number:int used:bool"),
    _entity("garden", "Plant", "plant", "plants", "species:str bed:str height:int water_days:int flowering:bool"),
    _entity("music", "Track", "track", "tracks", "title:str artist:str seconds:int plays:int explicit:bool"),
    _entity("billing", "Invoice", "invoice", "invoices", "number:str customer:str amount:int due_day:int paid:bool"),
    _entity("support", "Issue", "issue", "issues", "subject:str reporter:str priority:int votes:int closed:bool"),
    _entity("logistics", "Parcel", "parcel", "parcels", "tracking:str city:str weight:int stops:int fragile:bool"),
    _entity("cooking", "Recipe", "recipe", "recipes", "title:str chef:str minutes:int servings:int spicy:bool"),
    _entity("weather", "Reading", "reading", "readings", "station:str sky:str celsius:int humidity:int raining:bool"),
    _entity("blog", "Post", "post", "posts", "title:str slug:str likes:int words:int published:bool"),
    _entity("sports", "Team", "team", "teams", "name:str coach:str wins:int losses:int qualified:bool"),
    _entity("travel", "Trip", "trip", "trips", "city:str traveller:str nights:int budget:int booked:bool"),
    _entity("pets", "Pet", "pet", "pets", "name:str species:str age:int weight:int vaccinated:bool"),
    _entity("warehouse", "Bin", "bin", "bins", "aisle:str label_text:str quantity:int capacity:int locked:bool"),
    _entity("banking", "Account", "account", "accounts", "owner:str iban:str balance:int overdraft:int frozen:bool"),
    _entity("sales", "Lead", "lead", "leads", "email:str company:str score:int calls:int qualified:bool"),
    _entity("people", "Employee", "employee", "employees", "name:str team:str salary:int years:int remote:bool"),
    _entity("iot", "Sensor", "sensor", "sensors", "device:str room:str value:int battery:int online:bool"),
    _entity("cinema", "Movie", "movie", "movies", "title:str director:str minutes:int rating:int showing:bool"),
    _entity("parking", "Spot", "spot", "spots", "zone:str plate:str hours:int fee:int reserved:bool"),
    _entity("farming", "Plot", "plot", "plots", "crop:str farmer:str hectares:int yield_tons:int irrigated:bool"),
    _entity("courses", "Lesson", "lesson", "lessons", "title:str teacher:str minutes:int level:int recorded:bool"),
    _entity("housing", "Listing", "listing", "listings", "street:str landlord:str rent:int bedrooms:int furnished:bool"),
    _entity("energy", "Meter", "meter", "meters", "serial:str site:str kwh:int peak:int smart:bool"),
    _entity("games", "Player", "player", "players", "handle:str guild:str points:int level:int banned:bool"),
    _entity("transit", "Bus", "bus", "buses", "line:str depot:str stops:int minutes:int night:bool"),
    _entity("museum", "Exhibit", "exhibit", "exhibits", "title:str curator:str year:int visitors:int touring:bool"),
    _entity("charity", "Donation", "donation", "donations", "donor:str campaign:str amount:int month:int recurring:bool"),
    _entity("dental", "Appointment", "appointment", "appointments", "patient:str dentist:str hour:int chair:int confirmed:bool"),
)

# Sample string values for literals in tests, seeds and defaults.
SAMPLE_WORDS = (
    "alpha", "bravo", "cedar", "delta", "ember", "fjord", "granite", "harbor", "indigo", "juniper",
    "kestrel", "lumen", "maple", "nimbus", "onyx", "pepper", "quartz", "river", "saffron", "tundra",
    "umber", "violet", "willow", "xenon", "yarrow", "zephyr",
)

UI_LABELS = ("Save", "Refresh", "Add", "Next", "Back", "Clear", "Apply", "Load more", "Done")

CRON = (("0 3 * * *", "every night at 03:00"), ("*/15 * * * *", "every 15 minutes"),
        ("0 * * * *", "every hour"), ("30 6 * * 1", "every Monday at 06:30"),
        ("0 0 1 * *", "on the first day of each month"), ("0 12 * * *", "every day at noon"))

EFFECTS = ("db", "net", "fs", "clock", "random")

# Prompt phrasings: `{noun}` is what to write, `{what}` a third-person verb phrase saying what it
# does. The held-out bench never uses these shapes (tests/corpus/test_synth.py checks).
PHRASINGS = (
    "Write {noun} in Vox that {what}.",
    "In Vox, implement {noun}: it {what}.",
    "Create {noun} in Vox which {what}.",
    "Show me Vox code for {noun} that {what}.",
    "I need {noun} written in Vox. It {what}.",
    "Vox: {noun} that {what}.",
    "Give me {noun} (Vox) that {what}.",
    "Generate Vox source for {noun} which {what}.",
    "Using the Vox language, write {noun}: it {what}.",
    "Produce {noun} in Vox. It {what}.",
    "Express {noun} in Vox; it {what}.",
    "Please code {noun} in Vox that {what}.",
    "Implement {noun} in Vox. It {what}.",
    "Build {noun} with Vox that {what}.",
    "Define {noun} in Vox which {what}.",
    "Declare {noun} in Vox: it {what}.",
    "Add {noun} to a Vox module; it {what}.",
    "Could you write {noun} in Vox? It {what}.",
    "In the Vox language, {noun} that {what}.",
    "Vox task: {noun}. It {what}.",
    "Code {noun} in Vox, which {what}.",
    "Set up {noun} in Vox that {what}.",
    # The same request in other orders: what it does first, the thing asked for last; the name
    # anywhere in the sentence (a small model must find it, not expect it after the verb).
    "It {what}: write that as {noun} in Vox.",
    "Write Vox code that {what}; make it {noun}.",
    "Something in Vox that {what}, please, as {noun}.",
    "Task for Vox: something that {what}. It should be {noun}.",
    "{noun} in Vox, please: it {what}.",
    "Here is what I need in Vox: {noun}. It {what}.",
    "Vox code wanted: {noun}, which {what}.",
    "Can you put together {noun} in Vox? It {what}.",
    "Need {noun} for a Vox project: it {what}.",
    "Make {noun} (Vox). It {what}.",
    "Sketch {noun} in Vox which {what}.",
    "Requirement: it {what}. Deliverable: {noun}, in Vox.",
)

# Of the programs, the share whose quoted names are made up (generate.with_made_up_names): the
# default of `mens generate-data --made-up-names`. At 1.0 every name the code writes is one the
# prompt holds, and the base copies it rather than guessing it from the domain.
MADE_UP_SHARE = 0.5

# Rename requests (`{old}` → `{new}`), shown before or after the code: the edit lane of
# generate-data (generate.as_rename_edit).
RENAME_ASKS = (
    "Rename `{old}` to `{new}` in this Vox code:",
    "In the Vox program below, call `{old}` `{new}` instead.",
    "Change the name `{old}` to `{new}`:",
    "Refactor this Vox code so `{old}` is named `{new}`.",
    "Please rename {old} to {new} everywhere in this Vox snippet.",
)

# Openings a prompt may start with (about a third do): the situation a user describes before
# asking, as real requests do. `{domain}`, `{plural}` and `{thing}` (the entity, with article)
# come from the subject entity; `{field}` is one of its fields in words.
CONTEXTS = (
    "Our {domain} app keeps track of {plural}.",
    "I'm building a small {domain} system.",
    "{Domain}:",
    "For the {domain} team:",
    "We run a {domain} service that stores {plural}.",
    "Each of our {plural} has a {field}.",
    "Context: {thing} in a {domain} database.",
    "The {domain} dashboard needs this.",
    "A {domain} client asked for a change.",
    "Working on {plural} for a {domain} project.",
    "Our {domain} data has {plural} with a {field} each.",
    "Quick one for a {domain} codebase.",
)

# Syllables for made-up names (see pseudo_name): a name no word list predicts, so the only way
# to write it in the code is to copy it from the prompt.
ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "dr", "gr", "kl",
          "pl", "st", "tr", "sh", "ch", "w", "h", "j")
NUCLEI = ("a", "e", "i", "o", "u", "ai", "ou", "ee", "oo", "y")
CODAS = ("", "", "", "n", "r", "s", "t", "l", "m", "k", "x", "nd", "st", "ck")


def pseudo_word(rng, syllables: int) -> str:
    return "".join(rng.choice(ONSETS) + rng.choice(NUCLEI) + rng.choice(CODAS) for _ in range(syllables))


def pseudo_name(rng, capitalised: bool) -> str:
    """A made-up identifier: `velmo_rask` (one to three words), or `VelmoRask` for a type."""
    parts = [pseudo_word(rng, rng.choice((1, 2, 2, 3))) for _ in range(rng.choice((1, 2, 2, 3)))]
    return "".join(p.capitalize() for p in parts) if capitalised else "_".join(parts)


def made_up_name(rng, capitalised: bool, english: float = 0.0) -> str:
    """A made-up identifier: of syllables (pseudo_name), or — a share `english` of the time — one
    to three English words (`lines_capture`, `ModeTable`: english.ENGLISH_WORDS, none of the
    bench's). With `english` 0 it draws exactly what pseudo_name draws (same data as before)."""
    if english and rng.random() < english:
        from mens.corpus.synth.english import ENGLISH_WORDS

        parts = [rng.choice(ENGLISH_WORDS) for _ in range(rng.choice((1, 2, 2, 3)))]
        return "".join(p.capitalize() for p in parts) if capitalised else "_".join(parts)
    return pseudo_name(rng, capitalised)


def made_up_word(rng, english: float) -> str:
    """One made-up word: English (a share `english` of the time) or one or two syllables."""
    if english and rng.random() < english:
        from mens.corpus.synth.english import ENGLISH_WORDS

        return rng.choice(ENGLISH_WORDS)
    return pseudo_word(rng, rng.choice((1, 2)))


def short_made_up_name(rng, capitalised: bool, english: float) -> str:
    """A made-up identifier of one or two made-up words (`lines_capture`, `ModeTable`,
    `velmo_rask`): shorter than made_up_name's, for the several names a made-up subject and its
    program hold (a row of 256 tokens must still hold the whole request and answer)."""
    parts = [made_up_word(rng, english) for _ in range(rng.choice((1, 1, 2)))]
    return "".join(p.capitalize() for p in parts) if capitalised else "_".join(parts)


def made_up_entity(rng, english: float = 0.0) -> Entity:
    """A subject no word list predicts: a made-up thing (`ledger`, `ledgers`, `Ledger`) with
    made-up fields of one or two words — two str, two int, a bool, sometimes a float — so a
    program about it can only be written by copying its names from the prompt
    (`mens generate-data --made-up-subjects`; the prompt then spells the fields out)."""
    english = 1.0 if english and rng.random() < english else 0.0  # one kind of word a subject
    while True:
        var = made_up_word(rng, english)
        if var in RESERVED or not _NAME.match(var) or var.endswith("s"):
            continue
        plural = var + ("es" if var.endswith(("x", "sh", "ch")) else "s")
        taken = {var, plural}
        fields = []
        for type_ in ("str", "str", "int", "int", "bool") + (("float",) if rng.random() < 0.3 else ()):
            while True:
                name = short_made_up_name(rng, False, english)
                if name not in RESERVED and name not in taken and _NAME.match(name):
                    break
            taken.add(name)
            fields.append(Field(name, type_))
        rng.shuffle(fields)
        if plural not in RESERVED:
            return Entity(var, var.capitalize(), var, plural, tuple(fields))


_NAME = re.compile(r"^[a-z_][a-zA-Z0-9_]*$")
_TYPE = re.compile(r"^[A-Z][a-zA-Z0-9_]*$")


def _check_words() -> None:
    for e in ENTITIES:
        assert _TYPE.match(e.type_name), e
        for name in (e.var, e.plural, *(f.name for f in e.fields)):
            assert _NAME.match(name) and name not in RESERVED, (e.type_name, name)
        assert e.of("str") and e.of("int") and e.of("bool"), e.type_name


_check_words()
