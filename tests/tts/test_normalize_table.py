"""Table-driven normalization: input text -> the words spoken (#15 "Text that reads right").

`CASES` is also the input of the end-to-end check (tests/tts/test_normalize_heard.py) and of
benchmarks/bench_normalize.py, which synthesize every expected line and score what voxcli's ASR hears.
"""
from __future__ import annotations

import pytest

from voxcli.tts.chunker import ChunkerConfig, chunk_text
from voxcli.tts.dates import DateOrder
from voxcli.tts.normalize import normalize_text

#: (category, written, spoken)
CASES: list[tuple[str, str, str]] = [
    # cardinals
    ('cardinals', 'I have 3 apples.', 'I have three apples.'),
    ('cardinals', 'She has 12 cats.', 'She has twelve cats.'),
    ('cardinals', 'There were 42 people.', 'There were forty-two people.'),
    ('cardinals', 'We sold 100 tickets.', 'We sold one hundred tickets.'),
    ('cardinals', 'It weighs 105 tons.', 'It weighs one hundred five tons.'),
    ('cardinals', 'About 999 votes.', 'About nine hundred ninety-nine votes.'),
    ('cardinals', 'Roughly 1,000 fans came.', 'Roughly one thousand fans came.'),
    ('cardinals', 'We had 1,250 visitors.', 'We had one thousand two hundred fifty visitors.'),
    ('cardinals', 'A crowd of 12,345 people.', 'A crowd of twelve thousand three hundred forty-five people.'),
    ('cardinals', 'The city has 1,000,000 residents.', 'The city has one million residents.'),
    ('cardinals', 'Revenue was 2,500,000 last year.', 'Revenue was two million five hundred thousand last year.'),
    ('cardinals', 'He counted 0 errors.', 'He counted zero errors.'),
    ('cardinals', 'Route 66 is long.', 'Route sixty-six is long.'),
    ('cardinals', 'Call me in 15 minutes.', 'Call me in fifteen minutes.'),
    ('cardinals', 'Only 7 left.', 'Only seven left.'),
    # ordinals
    ('ordinals', 'She came 1st.', 'She came first.'),
    ('ordinals', 'He finished 2nd.', 'He finished second.'),
    ('ordinals', 'The 3rd time.', 'The third time.'),
    ('ordinals', 'Our 4th attempt.', 'Our fourth attempt.'),
    ('ordinals', 'The 21st century.', 'The twenty-first century.'),
    ('ordinals', 'On the 22nd floor.', 'On the twenty-second floor.'),
    ('ordinals', 'The 101st Airborne.', 'The one hundred first Airborne.'),
    ('ordinals', 'Her 11th birthday.', 'Her eleventh birthday.'),
    ('ordinals', 'The 12th night.', 'The twelfth night.'),
    ('ordinals', 'The 100th visitor.', 'The one hundredth visitor.'),
    # decimals
    ('decimals', 'Pi is 3.14.', 'Pi is three point one four.'),
    ('decimals', 'Add 0.5 cups.', 'Add zero point five cups.'),
    ('decimals', 'It rose .5 points.', 'It rose point five points.'),
    ('decimals', 'The score was 9.75 today.', 'The score was nine point seven five today.'),
    ('decimals', 'Tax is 7.25 now.', 'Tax is seven point two five now.'),
    ('decimals', 'The ratio is 1.05 here.', 'The ratio is one point zero five here.'),
    # negatives
    ('negatives', 'It was -5 outside.', 'It was minus five outside.'),
    ('negatives', 'The balance is -120 today.', 'The balance is minus one hundred twenty today.'),
    ('negatives', 'The change was -3.5 overall.', 'The change was minus three point five overall.'),
    ('negatives', 'Set it to −2 now.', 'Set it to minus two now.'),
    # years
    ('years', 'In 1984 it rained.', 'In nineteen eighty-four it rained.'),
    ('years', 'Born in 1905.', 'Born in nineteen oh five.'),
    ('years', 'It ended in 1900.', 'It ended in nineteen hundred.'),
    ('years', 'He left in 2024.', 'He left in twenty twenty-four.'),
    ('years', 'Since 2010 we grew.', 'Since twenty ten we grew.'),
    ('years', 'Back in 2005 it was new.', 'Back in two thousand five it was new.'),
    ('years', 'By 1999 it was over.', 'By nineteen ninety-nine it was over.'),
    ('years', 'The 1990s were fun.', 'The nineteen nineties were fun.'),
    ('years', 'The 1980s had big hair.', 'The nineteen eighties had big hair.'),
    ('years', 'The 2000s began.', 'The two thousands began.'),
    ('years', "Music of the '60s.", 'Music of the sixties.'),
    ('years', 'We loved the 80s.', 'We loved the eighties.'),
    ('years', 'In the summer of 1969.', 'In the summer of nineteen sixty-nine.'),
    ('years', 'It was founded in 1776.', 'It was founded in seventeen seventy-six.'),
    # ranges
    ('ranges', 'From 1990-1995 he worked.', 'From nineteen ninety to nineteen ninety-five he worked.'),
    ('ranges', 'The war lasted 1939–1945.', 'The war lasted nineteen thirty-nine to nineteen forty-five.'),
    ('ranges', 'Read pages 10-20.', 'Read pages ten to twenty.'),
    ('ranges', 'The years 1990–95 were hard.', 'The years nineteen ninety to ninety-five were hard.'),
    ('ranges', 'Ages 5-12 are welcome.', 'Ages five to twelve are welcome.'),
    # phone numbers
    ('phone numbers', 'Call 555-123-4567 now.', 'Call five five five, one two three, four five six seven now.'),
    ('phone numbers', 'Call (555) 123-4567 today.', 'Call five five five, one two three, four five six seven today.'),
    ('phone numbers', 'Dial +1 555 123 4567 please.', 'Dial plus one, five five five, one two three, four five six seven please.'),
    ('phone numbers', 'Ring +44 20 7946 0958 now.', 'Ring plus four four, two zero, seven nine four six, zero nine five eight now.'),
    ('phone numbers', 'Our fax is 555.867.5309 here.', 'Our fax is five five five, eight six seven, five three zero nine here.'),
    # currency
    ('currency', 'It costs $3.50 today.', 'It costs three dollars and fifty cents today.'),
    ('currency', 'Only $1 each.', 'Only one dollar each.'),
    ('currency', 'Just $0.99 now.', 'Just ninety-nine cents now.'),
    ('currency', 'Pay $2.05 please.', 'Pay two dollars and five cents please.'),
    ('currency', 'A $1,250.00 bill.', 'A one thousand two hundred fifty dollar bill.'),
    ('currency', 'Tickets are €12.', 'Tickets are twelve euros.'),
    ('currency', 'A £10 note.', 'A ten pound note.'),
    ('currency', 'They paid £1.2m for it.', 'They paid one point two million pounds for it.'),
    ('currency', 'Candy costs 5¢ here.', 'Candy costs five cents here.'),
    ('currency', 'A $1.5 million deal.', 'A one point five million dollar deal.'),
    ('currency', 'Worth $5bn today.', 'Worth five billion dollars today.'),
    ('currency', 'Save $20 now.', 'Save twenty dollars now.'),
    ('currency', 'It was ¥500 there.', 'It was five hundred yen there.'),
    ('currency', 'That is 12 € total.', 'That is twelve euros total.'),
    ('currency', 'A loss of -$5 today.', 'A loss of minus five dollars today.'),
    ('currency', 'He earned $3k last month.', 'He earned three thousand dollars last month.'),
    # percentages
    ('percentages', 'Sales rose 20%.', 'Sales rose twenty percent.'),
    ('percentages', 'Only 2.5% agree.', 'Only two point five percent agree.'),
    ('percentages', 'It fell -3% today.', 'It fell minus three percent today.'),
    ('percentages', 'Give 100% effort.', 'Give one hundred percent effort.'),
    # times
    ('times', 'At 10:30 we go.', 'At ten thirty we go.'),
    ('times', 'At 10:05 we start.', 'At ten oh five we start.'),
    ('times', 'Meet at 10:00 sharp.', "Meet at ten o'clock sharp."),
    ('times', 'See you at 8:15 pm.', 'See you at eight fifteen PM.'),
    ('times', 'Dinner at 7:30 PM.', 'Dinner at seven thirty PM.'),
    ('times', 'Wake at 6:45 am.', 'Wake at six forty-five AM.'),
    ('times', 'The train leaves at 20:45.', 'The train leaves at twenty forty-five.'),
    ('times', 'The shop opens at 08:15.', 'The shop opens at eight fifteen.'),
    ('times', 'Lunch is at 12:30.', 'Lunch is at twelve thirty.'),
    ('times', 'The bell rang at 14:00.', 'The bell rang at fourteen hundred.'),
    ('times', 'The clock struck 00:00.', 'The clock struck midnight.'),
    ('times', 'Start at 8 pm.', 'Start at eight PM.'),
    ('times', 'Leave at 7am.', 'Leave at seven AM.'),
    ('times', 'It ended at 3 p.m. Then we left.', 'It ended at three PM. Then we left.'),
    ('times', 'Arrive at 9 a.m. tomorrow.', 'Arrive at nine AM tomorrow.'),
    # dates
    ('dates', 'On 2026-12-01 we launch.', 'On December first, twenty twenty-six we launch.'),
    ('dates', 'The log says 2024-02-29 today.', 'The log says February twenty-ninth, twenty twenty-four today.'),
    ('dates', 'Due 1/12/2026 at noon.', 'Due January twelfth, twenty twenty-six at noon.'),
    ('dates', 'Born 25/12/1990 in Rome.', 'Born the twenty-fifth of December, nineteen ninety in Rome.'),
    ('dates', 'Signed on Dec. 1, 2026.', 'Signed on December first, twenty twenty-six.'),
    ('dates', 'See you Dec. 1 then.', 'See you December first then.'),
    ('dates', 'It opened on December 1st.', 'It opened on December first.'),
    ('dates', 'Due March 3 this year.', 'Due March third this year.'),
    ('dates', 'On Jan. 15, 2025 it snowed.', 'On January fifteenth, twenty twenty-five it snowed.'),
    ('dates', 'We met on 1 December 2026.', 'We met on the first of December, twenty twenty-six.'),
    ('dates', 'On the 3rd of March we left.', 'On the third of March we left.'),
    ('dates', 'It closed on Sept. 30.', 'It closed on September thirtieth.'),
    # units
    ('units', 'Walk 5 km today.', 'Walk five kilometers today.'),
    ('units', 'It is 20°C outside.', 'It is twenty degrees Celsius outside.'),
    ('units', 'Set the oven to 350°F now.', 'Set the oven to three hundred fifty degrees Fahrenheit now.'),
    ('units', 'It was -5°C last night.', 'It was minus five degrees Celsius last night.'),
    ('units', 'Carry 3 kg of rice.', 'Carry three kilograms of rice.'),
    ('units', 'Download 100 MB first.', 'Download one hundred megabytes first.'),
    ('units', 'Only 1 kg left.', 'Only one kilogram left.'),
    ('units', 'Add 1.5 kg of flour.', 'Add one point five kilograms of flour.'),
    ('units', 'Run 5-10 km daily.', 'Run five to ten kilometers daily.'),
    ('units', 'Drive 60 km/h here.', 'Drive sixty kilometers per hour here.'),
    ('units', 'The box is 30 cm wide.', 'The box is thirty centimeters wide.'),
    ('units', 'Drink 2 L of water.', 'Drink two liters of water.'),
    ('units', 'The limit is 65 mph here.', 'The limit is sixty-five miles per hour here.'),
    ('units', 'A 16 GB card.', 'A sixteen gigabyte card.'),
    ('units', 'The CPU runs at 3.5 GHz.', 'The CPU runs at three point five gigahertz.'),
    ('units', 'Lift 10 lbs twice.', 'Lift ten pounds twice.'),
    ('units', 'He is 6 ft tall.', 'He is six feet tall.'),
    ('units', 'A 45° angle.', 'A forty-five degree angle.'),
    ('units', 'Wait 250 ms then retry.', 'Wait two hundred fifty milliseconds then retry.'),
    # roman numerals
    ('roman numerals', 'Henry VIII had six wives.', 'Henry the Eighth had six wives.'),
    ('roman numerals', 'Louis XIV built Versailles.', 'Louis the Fourteenth built Versailles.'),
    ('roman numerals', 'Pope John Paul II visited.', 'Pope John Paul the Second visited.'),
    ('roman numerals', 'After World War II ended.', 'After World War Two ended.'),
    ('roman numerals', 'Read Chapter IV now.', 'Read Chapter Four now.'),
    ('roman numerals', 'Queen Elizabeth II spoke.', 'Queen Elizabeth the Second spoke.'),
    ('roman numerals', 'King George III ruled.', 'King George the Third ruled.'),
    ('roman numerals', 'Rocky III is better.', 'Rocky Three is better.'),
    # titles and addresses
    ('titles and addresses', 'Dr. Smith is here.', 'Doctor Smith is here.'),
    ('titles and addresses', 'Gov. Smith arrived.', 'Governor Smith arrived.'),
    ('titles and addresses', 'Sen. Jones spoke.', 'Senator Jones spoke.'),
    ('titles and addresses', 'We visited St. Louis today.', 'We visited Saint Louis today.'),
    ('titles and addresses', 'She lives on Main St. now.', 'She lives on Main Street now.'),
    ('titles and addresses', 'St. Mary lives on Oak St. in town.', 'Saint Mary lives on Oak Street in town.'),
    ('titles and addresses', 'Mr. and Mrs. Jones came.', 'Mister and Missus Jones came.'),
    ('titles and addresses', 'Prof. Lee teaches math.', 'Professor Lee teaches math.'),
    ('titles and addresses', 'Rep. Lee voted no.', 'Representative Lee voted no.'),
    ('titles and addresses', 'Gen. Patton led them.', 'General Patton led them.'),
    ('titles and addresses', 'Capt. Cook sailed far.', 'Captain Cook sailed far.'),
    ('titles and addresses', 'Meet me on Elm Dr. Then go home.', 'Meet me on Elm Drive. Then go home.'),
    ('titles and addresses', 'He lives at 221 Baker St. now.', 'He lives at two twenty-one Baker Street now.'),
    ('titles and addresses', 'Apple Inc. Then Sony Ltd. made it.', 'Apple Incorporated. Then Sony Limited made it.'),
    ('titles and addresses', 'Mt. Everest is tall.', 'Mount Everest is tall.'),
    # e-mails and URLs
    ('e-mails and URLs', 'Mail jane.doe@example.com today.', 'Mail jane dot doe at example dot com today.'),
    ('e-mails and URLs', 'Write to info@voxcli.dev now.', 'Write to info at voxcli dot dev now.'),
    ('e-mails and URLs', 'Visit https://www.example.com today.', 'Visit example dot com today.'),
    ('e-mails and URLs', 'See https://example.com/docs/intro for more.', 'See example dot com slash docs slash intro for more.'),
    ('e-mails and URLs', 'Go to example.com. It works.', 'Go to example dot com. It works.'),
    ('e-mails and URLs', 'Open www.python.org now.', 'Open python dot org now.'),
    ('e-mails and URLs', 'Read https://github.com/owner/repo?tab=readme please.', 'Read github dot com slash owner slash repo please.'),
    # symbols
    ('symbols', 'Tom & Jerry.', 'Tom and Jerry.'),
    ('symbols', 'Use C++ daily.', 'Use C plus plus daily.'),
    ('symbols', 'Then 1 + 1 = 2 holds.', 'Then one plus one equals two holds.'),
    ('symbols', 'Follow @voxcli today.', 'Follow at voxcli today.'),
    ('symbols', 'Love #StreamingTTS now.', 'Love hashtag Streaming TTS now.'),
    ('symbols', 'Trending: #tbt again.', 'Trending: hashtag tbt again.'),
    ('symbols', 'He was #1 again.', 'He was number one again.'),
    ('symbols', 'Play it in C# major.', 'Play it in C sharp major.'),
    ('symbols', 'It costs ~5 dollars.', 'It costs about five dollars.'),
    ('symbols', 'Use a 3 × 4 grid.', 'Use a three times four grid.'),
    ('symbols', 'Email me @ home.', 'Email me at home.'),
    # fractions and ratios
    ('fractions and ratios', 'Eat 1/2 of it.', 'Eat one half of it.'),
    ('fractions and ratios', 'Add 3/4 of the flour.', 'Add three quarters of the flour.'),
    ('fractions and ratios', 'I scored 8/10 today.', 'I scored eight out of ten today.'),
    ('fractions and ratios', 'The shop is open 24/7.', 'The shop is open twenty-four seven.'),
    ('fractions and ratios', 'The screen is 16:9 wide.', 'The screen is sixteen to nine wide.'),
    ('phone numbers', 'In an emergency call 911.', 'In an emergency call nine one one.'),
    ('units', 'He is 5\'10" tall.', 'He is five feet ten inches tall.'),
    # mixed
    ('mixed', 'On 2026-12-01 at 10:30, Dr. Smith paid $3.50.', 'On December first, twenty twenty-six at ten thirty, Doctor Smith paid three dollars and fifty cents.'),
    ('mixed', 'In 1984, Gov. Jones spent $1.2m on 5 km of road.', 'In nineteen eighty-four, Governor Jones spent one point two million dollars on five kilometers of road.'),
]


@pytest.mark.parametrize("category, text, spoken", CASES, ids=[f"{c}:{t}" for c, t, _ in CASES])
def test_table(category: str, text: str, spoken: str) -> None:
    assert normalize_text(text) == spoken


def test_table_is_large_and_covers_every_category() -> None:
    assert len(CASES) >= 150
    assert len({t for _, t, _ in CASES}) == len(CASES)
    assert {c for c, _, _ in CASES} >= {"cardinals", "ordinals", "decimals", "negatives", "years", "ranges",
                                       "phone numbers", "currency", "percentages", "times", "dates", "units",
                                       "roman numerals", "titles and addresses", "e-mails and URLs", "symbols"}


def test_spoken_text_has_no_digits_left() -> None:
    """Every number leaves as words: what espeak gets is exactly what is said."""
    assert [s for _, _, s in CASES if any(ch.isdigit() for ch in s)] == []


@pytest.mark.parametrize("text, spoken", [
    ("Due 1/12/2026.", "Due the first of December, twenty twenty-six."),
    ("Due 12/25/2026.", "Due December twenty-fifth, twenty twenty-six."),  # only valid month-first
    ("Due 1.12.26.", "Due the first of December, twenty twenty-six."),
])
def test_slashed_dates_follow_the_date_order(text: str, spoken: str) -> None:
    assert normalize_text(text, date_order=DateOrder.DMY) == spoken


#: Includes "Signed on Dec. 1, 2026.": the chunker never cuts at a comma before a digit, since the
#: year alone ("2026.") would read "two thousand twenty-six".
@pytest.mark.parametrize("text, spoken", [(t, s) for _, t, s in CASES])
def test_chunks_normalize_to_the_same_words_as_the_whole_text(text: str, spoken: str) -> None:
    """The chunker never cuts inside a span the normalizer reads as one ("Dec. 1", "$3.50", "8:15 p.m.", URLs)."""
    pieces = [normalize_text(c) for c in chunk_text(text, ChunkerConfig(first_words=0))]
    assert " ".join(pieces).split() == spoken.split()
