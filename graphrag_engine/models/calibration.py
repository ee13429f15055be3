"""Calibration text for the int8 embedder export (graphrag_engine/models/onnx_int8.py).

Error-compensating weight rounding needs activations of text like what gets indexed. These
paragraphs were written for this project in the style of encyclopedia passages (names, dates,
places, numbers, titles). The people, places and works in them are invented, so nothing here
is a fact to retrieve. Shipping them keeps the export deterministic and offline.
"""

CALIBRATION_TEXTS: tuple[str, ...] = (
    "Harlow Vance (born 14 March 1978) is a retired English footballer who played as a central "
    "midfielder for Ashcombe United and the Kestrel Rovers. He made 312 league appearances, "
    "scoring 41 goals, and won the regional cup twice before moving into coaching in 2014.",
    "The Orlen River rises in the Varkas Hills and flows 412 kilometres north-east before "
    "joining the Tessin near the market town of Brovik. Its basin covers about 9,800 square "
    "kilometres, and three hydroelectric dams built between 1952 and 1967 regulate its flow.",
    "Glass Harbour is the third studio album by the indie rock band The Pale Lanterns, released "
    "on 2 October 2009 through Northgate Records. It was recorded in Montreal over six weeks, "
    "reached number 12 on the national chart and produced the singles 'Tidewater' and 'Signal'.",
    "Veridium is a hypothetical chemical element with the symbol Vd, described in a 1961 paper "
    "as a heavy transition metal. Its predicted density is close to that of osmium, and later "
    "authors argued that any isotope would decay within microseconds by alpha emission.",
    "The Last Orchard is a 1994 drama film directed by Ines Calderone and starring Paul Dorne "
    "as a widowed farmer in postwar Italy. It premiered at the Venice Film Festival, earned "
    "two nominations for best foreign language film and grossed $18 million worldwide.",
    "The Chancellor of the Exchequer of Marland is the minister responsible for the treasury "
    "and the annual budget. The office was created by the Constitution of 1848, and its holder "
    "is appointed by the monarch on the advice of the prime minister.",
    "Port Celestine is a coastal city and the capital of Avern Province, with a population of "
    "about 640,000 at the 2020 census. Founded as a fishing settlement in the 11th century, it "
    "grew into a major shipbuilding centre and is served by an international airport.",
    "The Battle of Greyford Ridge was fought on 9 June 1644 between royalist cavalry under "
    "Lord Ashby and a parliamentary army led by Colonel Hemming. After six hours of fighting "
    "the royalists withdrew, leaving about 1,200 dead, and the town surrendered a week later.",
    "The spotted marsh warbler (Acrocephalus fictus) is a small passerine bird found in reed "
    "beds across eastern Europe and central Asia. It measures 13 centimetres in length, feeds "
    "mainly on insects and migrates to sub-Saharan Africa for the winter.",
    "Ellesmere Technical University is a public research university in the city of Dunmore, "
    "established in 1903 as a school of mining. It enrols about 21,000 students across eight "
    "faculties and is known for its programmes in civil and electrical engineering.",
    "Night Shift Diaries is an American sitcom created by Dana Morrow that aired on the Central "
    "Broadcasting Network from 2003 to 2008. The series followed the staff of a hospital "
    "emergency room across 98 episodes and won an Emmy Award for its writing in 2006.",
    "The Salt Road is a 1962 novel by the Irish author Cormac Leary, set in a village on the "
    "Atlantic coast during the famine years. It was his second book, was translated into "
    "fourteen languages and was adapted as a three-part television serial in 1987.",
    "Brightwell Industries is a multinational manufacturer of industrial pumps and valves "
    "headquartered in Rotterdam. Founded in 1921 by the brothers Karel and Jan Brightwell, it "
    "employs some 34,000 people and reported revenue of 7.2 billion euros in 2022.",
    "Mount Tarrow is a 4,218-metre stratovolcano in the northern Kessel Range and the highest "
    "peak of the region. It last erupted in 1873. The first recorded ascent was made in 1911 "
    "by a Swiss expedition that followed the glacier on its western face.",
    "Amadeo Ferrante (1801 - 1869) was an Italian composer and conductor best known for his "
    "operas and sacred choral music. He studied in Naples, became music director of the Teatro "
    "Comunale in 1834 and wrote seventeen operas, of which 'Rosalba' is the most performed.",
    "Horizon Seven is an uncrewed space probe launched on 4 August 2015 to study the outer "
    "asteroid belt. After a gravity assist from Mars it reached its first target in 2019, "
    "returning images of a 40-kilometre asteroid with a small moon.",
    "Varesh is a Turkic language spoken by about 350,000 people in the river valleys of the "
    "southern steppe. It is written in a Latin alphabet adopted in 1993, has eight vowels with "
    "vowel harmony and borrows much of its technical vocabulary from Russian.",
    "Coastal fever is an infectious disease caused by a bacterium carried by ticks. Symptoms "
    "begin five to ten days after a bite and include a high temperature, headache and a rash; "
    "it is treated with antibiotics, and untreated cases are fatal in about 5 percent.",
    "Starfall Legends is an action role-playing video game developed by Moonlit Studio and "
    "published in 2017 for Windows and home consoles. Players explore an open world as a "
    "cartographer, and the game sold over three million copies in its first year.",
    "The 1998 general election in Norland was held on 17 May to elect all 200 members of the "
    "National Assembly. The Liberal Union won 84 seats and formed a coalition with the Farmers' "
    "Party, and Margit Salo became the country's first female prime minister.",
    "Lucia Ortega (1887 - 1954) was a Spanish painter associated with the modernist movement in "
    "Barcelona. Her portraits and harbour scenes were shown at the Paris Salon in 1912, and "
    "the national gallery in Madrid holds the largest collection of her work.",
    "The Highland Valley Railway is a 96-kilometre standard gauge line linking Carrow with the "
    "port of Kinsale Bay. Opened in 1869, it carried coal and passengers until 1965, and part "
    "of the route is now run as a heritage railway with steam locomotives.",
    "The Jin-Tao dynasty ruled the central plains from 1123 to 1279 and moved its capital "
    "twice. Its emperors expanded the civil examination system, and its era saw printing, "
    "porcelain and river trade flourish before the Mongol conquest ended it.",
    "The Western Premier Hockey League is a professional ice hockey league founded in 1972 with "
    "six teams. It now has fourteen clubs in two conferences, each playing an 82-game regular "
    "season, and the winner of the playoff finals receives the Harrington Cup.",
    "Who directed the film in which the lead actor played a widowed farmer, and in what year "
    "was the director born? The question asks for two facts about the same film.",
    "The album was recorded at Abbey Lane Studios in London with producer Tom Riggs, and its "
    "title track was later covered by several artists. Critics praised the arrangements.",
    "In mathematics, a prime number is a natural number greater than 1 that has no divisors "
    "other than 1 and itself. Euclid proved that there are infinitely many primes.",
    "The company's chief executive, Amira Hassan, announced in 2021 that its plant near Leeds "
    "would close, moving production of 4,000 units a year to a factory in Poland.",
)
