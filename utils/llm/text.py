"""A text of a few thousand tokens for chapter 7's StreamingLLM measurement, shipped with the course.

It was written for this course, copies no other text, and is dedicated to the public domain (CC0 1.0),
so that anyone may reuse it with the chapter's results. It is plain English prose, as a model meets it:
a story in paragraphs, with names, numbers and dialogue that come back later in the text, so that a model
that forgets the start of the text pays for it.
"""

from __future__ import annotations

__all__ = ["LIGHTHOUSE_STORY"]

_WRAPPED = """\
The Keeper of the Northern Light

The lighthouse on Corran Point had been built in the year the old harbour froze, and for most of its life it was
kept by people who did not stay long. The island was small, the wind was constant, and the supply boat came only on
the first Tuesday of each month, when the weather allowed it. Maren Hale arrived in the spring of her thirty-first
year with two trunks, a crate of books and a tin box of seeds, and the harbour master, who had watched eleven
keepers come and go, gave her until the autumn.

The tower was ninety-four steps high. Maren counted them on the first evening, carrying a lamp in one hand and the
logbook in the other, and she counted them again the next morning because she did not trust the first count. At the
top the great lens sat in its brass frame like a beehive made of glass. It had come from a workshop in the south,
packed in straw, and the brass plate under it still bore the maker's name and a number: 1187. The previous keeper
had left a note taped to the frame. It said, in small careful letters, that the clockwork ran for four hours on one
winding, that the third gear slipped in cold weather, and that the keeper should never, under any circumstances, let
the light go dark on a night of fog.

Maren read the note twice and put it in the logbook. Then she wound the clockwork, oiled the third gear, and sat
down to wait for the dark.

The first weeks were a lesson in small things. She learned that the rain came from the west and the fog from the
north, and that the fog was the more dangerous, because it arrived without sound. She learned that the gulls nested
on the east ledge and screamed at anyone who came near, and that the rabbits ate anything green she planted outside
the stone wall. She learned that the tide left a path of flat rocks to the little island called the Bell, where a
ruined chapel stood with no roof and a bell with no rope, and that the path stayed dry for two hours and no longer.
She wrote all of it in the logbook, in the same careful way the previous keeper had written his note, because she
had decided that whoever came after her should not have to learn it all again.

On the first Tuesday of May the supply boat came, steered by a young man named Tobias Wren. He brought flour, lamp
oil, a sack of potatoes, the post and the news. The news was that a storm had sunk two fishing boats off the
southern cape, that the price of oil had gone up again, and that the harbour master had placed a bet on the day she
would leave. Maren asked which day he had chosen. Tobias said the twentieth of September. She thanked him, paid for
the oil, and asked him to bring a coil of rope on his next visit, strong enough to hang a bell.

Summer came slowly to Corran Point. The days grew long enough that the light was lit only a few hours each night,
and Maren used the extra hours to mend the wall around the garden. She laid the stones the way her grandfather had
taught her, the large ones at the bottom and the flat ones on top, each stone touching three others. By July the
wall was high enough to keep the rabbits out, and the tin box of seeds had become two rows of beans, a row of onions
and a tangle of peas that climbed the wall as if they meant to escape over it. She counted the pea pods one evening
and wrote the number in the logbook: two hundred and six.

In August the rope arrived. Tobias carried it up from the boat himself, because it was heavy, and he asked what she
wanted with a bell. She told him about the chapel on the Bell, and about the old bell hanging there with no rope,
and about the fog that came without sound. A light could not be seen in a thick fog, she said, but a bell could be
heard. If she could ring the old bell on foggy nights, a boat that had lost the light might still find the rocks
before the rocks found it. Tobias said that the path to the Bell was dry for two hours and no longer, and that fog
did not wait for the tide. Maren said she knew that. She had written it in the logbook.

It took her three low tides to hang the rope. On the first she climbed the chapel wall and found that the bell's
wooden beam had rotted through on one side. On the second she carried a new beam across the rocks, cut from the
driftwood that piled up on the north beach, and fixed it in place with iron pins. On the third she tied the rope,
pulled it once, and heard the bell speak for the first time in perhaps fifty years. The sound was deep and a little
cracked, and it rolled over the water towards the mainland like a wave going the wrong way. The gulls rose from the
east ledge all at once and screamed at it. Maren laughed, and then she ran, because the water was already covering
the flat rocks.

The twentieth of September came and went. Tobias reported that the harbour master had lost his bet and was not
pleased about it, and that he now said she would leave before the first snow. Maren asked him to tell the harbour
master that the beans had done well, and that she was saving the seeds.

The autumn storms began in October. The wind came from the west for days at a time, and the sea threw itself at the
rocks below the tower until the whole building hummed. The third gear slipped twice, exactly as the note had warned,
and twice Maren climbed the ninety-four steps in the middle of the night to oil it and wind the clockwork again. She
began to sleep in the watch room at the top of the tower, on a narrow bed beside the stove, so that she would hear
the clockwork slowing before the light could fail. In the logbook she wrote the times of every winding, the
direction of the wind, and the ships she saw passing: a grain ship, two fishing boats, a steamer with a red funnel
going north.

The fog came on the ninth of November. It came in the afternoon, out of the north, without a sound, and by four
o'clock Maren could not see the garden wall from the door of the tower. She lit the lamp early, wound the clockwork,
and stood at the glass. The beam went out into the grey and came back to her, and she knew that from the sea it
would look like nothing more than a faint glow, or like nothing at all. She looked at the tide table. The path to
the Bell would be dry at six o'clock, for two hours and no longer.

She went down the ninety-four steps with a lantern, a coat and a flask of tea. She crossed the flat rocks by feeling
for them with her boots, counting her steps as she had counted the stairs, and she found the chapel by walking into
its wall. Then she took the rope in both hands and began to ring.

She rang the bell for an hour and a half. She rang it in a slow pattern, three strokes and a pause, three strokes
and a pause, because she had read in one of her books that a pattern carried better than a single sound and told a
sailor that someone was there. Her arms ached after twenty minutes and burned after forty. At a quarter past seven
she heard, far off to the north, the sound of an engine running slow, and then a horn, once, and then the engine
again, turning away from the rocks. She rang for another quarter of an hour to be sure. Then she looked down and saw
water moving between the stones at her feet.

The way back was the worst part. The flat rocks were already wet, and in two places the water reached her knees. She
held the lantern high and walked the path by memory: the long stone shaped like a table, the two small ones close
together, the gap that was always wider than she remembered, the slope of weed that led up to the point. When she
reached the door of the tower she was soaked to the waist and shaking, and the clockwork upstairs had almost run
down. She climbed the ninety-four steps, wound it, oiled the third gear, and only then sat down by the stove and
opened the flask of tea, which had gone cold.

On the first Tuesday of December Tobias came with the supply boat and a passenger. The passenger was the captain of
the steamer with the red funnel. He had been coming home on the ninth of November, he said, with forty people on
board, and his compass had been playing up since the storms. He had lost sight of the coast in the fog, and he had
not seen the light at all. But he had heard a bell, three strokes and a pause, where his chart said there was no
bell, and he had turned his ship away from the sound. An hour later the fog had lifted enough for him to see the
Corran light behind him, and he had understood how close he had come.

He had brought something with him, wrapped in sailcloth. It was a brass plate for the chapel wall, and on it, in
plain letters, was the date, the ninth of November, and the words: rung by the keeper of the northern light. Maren
did not know what to say. She made tea for the captain and for Tobias, and showed them the garden, which was bare
now, and the tin box, which was full again, this time of seeds she had saved herself.

The harbour master lost his second bet when the first snow fell in January and the light on Corran Point was still
burning. He did not place a third. When Tobias told her this, Maren wrote it in the logbook, under the times of the
windings and the direction of the wind, and under a new heading she had started that winter: things the next keeper
should know.

The list was long by the spring. It said that the stairs had ninety-four steps, and that the lens had the number
1187 on its plate. It said that the third gear slipped in cold weather and needed oil, and that the clockwork ran
for four hours on one winding. It said that the rain came from the west and the fog from the north, without a sound.
It said that the rabbits could be kept out by a wall with each stone touching three others, and that peas would
climb anything. It said that the path to the Bell was dry for two hours and no longer, and that the bell should be
rung in threes, with a pause, so that a sailor would know that someone was there. And at the bottom, in the same
small careful letters as the note she had found taped to the lens on her first evening, it said that the keeper
should never, under any circumstances, let the light go dark on a night of fog.

Maren Hale kept the light on Corran Point for twenty-two years. When she finally left, on a calm Tuesday in May, the
new keeper found the logbook on the table in the watch room, open at the list, and beside it a tin box of seeds.
"""

# The paragraphs, each on one line as a text would hold it (wrapped above only to fit the source's width).
LIGHTHOUSE_STORY = "\n\n".join(" ".join(paragraph.split("\n")) for paragraph in _WRAPPED.strip().split("\n\n"))
