/**
 * Task-to-capability vocabulary for natural-language discovery. Agents describe tasks in everyday
 * words ("text message", "coordinates"); API descriptions use the trade's words ("SMS",
 * "geocoding"). Each entry maps a phrase (matched on word boundaries, lower case) to extra terms
 * that are searched alongside the agent's own words. Entries were written from the vocabulary of
 * the domains, then checked against the development set (docs/discovery-devset.json).
 */
/**
 * Named things whose name alone says what the task is about (issue 35: "a football club means soccer
 * scores"): teams of the major North American leagues and Europe's largest football clubs and leagues, by the capability
 * that answers about them (capabilities.ts) and the words their APIs use. Team names that are common words
 * in other senses ("heat", "magic", "thunder", "jazz", "giants", "chargers", "rangers", "lions") are only
 * listed with their city.
 */
const TEAMS: ReadonlyArray<{ capability: string | null; terms: string; names: string }> = [
  {
    capability: 'basketball',
    terms: 'nba basketball',
    names:
      'lakers, celtics, knicks, sixers, 76ers, trail blazers, dallas mavericks, denver nuggets, la clippers, los angeles clippers, ' +
      'toronto raptors, cleveland cavaliers, detroit pistons, indiana pacers, minnesota timberwolves, new orleans pelicans, ' +
      'memphis grizzlies, golden state warriors, miami heat, chicago bulls, brooklyn nets, milwaukee bucks, phoenix suns, ' +
      'houston rockets, san antonio spurs, atlanta hawks, charlotte hornets, orlando magic, washington wizards, ' +
      'oklahoma city thunder, sacramento kings, utah jazz',
  },
  {
    capability: 'soccer-scores',
    terms: 'soccer football',
    // "Arsenal" alone is the one exception to the rule above: as people write tasks, it is the club.
    names:
      'manchester united, man united, man utd, manchester city, man city, arsenal, chelsea fc, liverpool fc, tottenham, ' +
      'tottenham hotspur, everton, aston villa, west ham, newcastle united, real madrid, atletico madrid, fc barcelona, barca, ' +
      'bayern munich, borussia dortmund, juventus, ac milan, inter milan, psg, paris saint germain, ajax amsterdam, celtic fc, ' +
      'rangers fc, premier league, la liga, bundesliga, serie a, champions league',
  },
  {
    capability: null,
    terms: 'nfl football',
    names:
      'steelers, 49ers, niners, seahawks, new england patriots, dallas cowboys, green bay packers, kansas city chiefs, ' +
      'denver broncos, baltimore ravens, minnesota vikings, tampa bay buccaneers, new york giants, philadelphia eagles, ' +
      'new york jets, las vegas raiders, cincinnati bengals, indianapolis colts',
  },
  {
    capability: null,
    terms: 'mlb baseball',
    names:
      'yankees, red sox, white sox, astros, phillies, los angeles dodgers, la dodgers, new york mets, chicago cubs, atlanta braves, ' +
      'seattle mariners, san diego padres, toronto blue jays',
  },
  {
    capability: null,
    terms: 'nhl hockey',
    names: 'maple leafs, canadiens, boston bruins, chicago blackhawks, detroit red wings, edmonton oilers, vancouver canucks',
  },
];
const teamsBy = (team: (typeof TEAMS)[number]) => team.names.split(', ');

/**
 * Named things, too (issue 35: "a pop star means concerts and events"): widely known touring musicians and bands,
 * written from general knowledge in 2026 (WordNet 3.1 knows few of them, the catalog none), whose name in a task
 * says it is about an artist: their concerts, tours and set lists, the kind of service that answers about them.
 * Names that are everyday words or phrases in another sense ("queen", "muse", "journey", "eagles", "the cure",
 * "take that", "usher", "drake", "pink", "sting", "nirvana", "oasis", "the 1975", "one direction", "ac dc",
 * "green day"), or names many other people have ("adele", "madonna", "sam smith", "fred again"), are left out.
 */
const ARTISTS: readonly string[] = (
  'taylor swift, beyonce, ed sheeran, coldplay, radiohead, u2, metallica, rihanna, lady gaga, bruno mars, ' +
  'billie eilish, ariana grande, harry styles, dua lipa, the weeknd, post malone, bad bunny, blackpink, olivia rodrigo, ' +
  'sabrina carpenter, chappell roan, charli xcx, kendrick lamar, travis scott, kanye west, jay z, nicki minaj, cardi b, ' +
  'justin bieber, miley cyrus, selena gomez, katy perry, shawn mendes, lewis capaldi, doja cat, lizzo, sza, ' +
  'lana del rey, lorde, hozier, noah kahan, phoebe bridgers, mitski, tame impala, arctic monkeys, the killers, ' +
  'imagine dragons, maroon 5, twenty one pilots, fall out boy, paramore, foo fighters, pearl jam, ' +
  'red hot chili peppers, linkin park, kings of leon, florence and the machine, mumford and sons, ' +
  'vampire weekend, gorillaz, depeche mode, pet shop boys, rolling stones, the rolling stones, paul mccartney, elton john, ' +
  'bruce springsteen, bob dylan, neil young, fleetwood mac, billy joel, stevie wonder, lionel richie, pink floyd, ' +
  'roger waters, guns n roses, iron maiden, def leppard, bon jovi, aerosmith, slipknot, rammstein, ' +
  'system of a down, kylie minogue, robbie williams, spice girls, backstreet boys, westlife, ' +
  'little mix, jonas brothers, celine dion, mariah carey, andrea bocelli, andre rieu, michael buble, shania twain, ' +
  'dolly parton, garth brooks, luke combs, morgan wallen, zach bryan, chris stapleton, carrie underwood, ' +
  'alicia keys, john legend, janet jackson, shakira, karol g, j balvin, peso pluma, calvin harris, ' +
  'david guetta, martin garrix, kygo, skrillex, daft punk, abba, bjork, sigur ros, stormzy, eminem, ' +
  'snoop dogg'
).split(', ');

const PEOPLE =
  'team whole customer customers client clients group staff family friends parents players guests members patients tenants ' +
  'landlord driver drivers employees students subscribers mom dad wife husband boss neighbours neighbors class coach';

interface NeedVerb {
  capability: string;
  terms: string;
  verbs: readonly string[];
  pronouns: readonly string[];
  nouns: readonly string[];
  /** Phrases of their own ("send a text", "read aloud"). */
  more: readonly string[];
  /** How many words may come between the verb and its object (default 3: "sign the rental agreement"). */
  gap?: number;
  /** Words that make the verb another verb when right after it ("sign up", "sign in": a sign-up form is not signed). */
  particles?: readonly string[];
}

/**
 * The verbs issue 35 names as ignored, with what follows them, so that the noun's senses do not fire
 * ("text the team" but not "translate the text the user typed"; "sign the lease" but not "sign the
 * request"; "draw a logo" but not "draw a card"), by the capability that does them and its words. A
 * verb names the need when one of its objects follows it within three words ("sign the rental agreement").
 */
const NEED_VERBS: readonly NeedVerb[] = [
  {
    capability: 'sms',
    terms: 'sms messaging',
    verbs: ['text'],
    pronouns: ['me', 'them', 'him', 'her', 'us', 'everyone', 'everybody'],
    nouns: PEOPLE.split(' '),
    more: [
      ...['know', 'them', 'me', 'us', 'customers', 'people', 'reminder', 'reminders', 'alert', 'alerts'].map((w) => `${w} by text`),
      'send a text',
    ],
  },
  {
    capability: 'e-signature',
    terms: 'esignature signature',
    verbs: ['sign', 'signs', 'signing'],
    pronouns: [],
    nouns: 'lease contract contracts agreement agreements form forms document documents nda paperwork papers waiver consent offer'.split(' '),
    more: [],
    particles: ['up', 'in', 'out', 'into'],
  },
  {
    // Hearing what is written: speech synthesis ("read aloud" is how its providers describe it too).
    capability: 'text-to-speech',
    terms: 'speech synthesis tts voice',
    verbs: [],
    pronouns: [],
    nouns: [],
    more: ['read out loud', 'read aloud', 'listen instead', 'rather listen'],
  },
  {
    // Emailing people something: sending email (a kind counted only when stated: capabilities.ts, `statedOnly`).
    // The verb only right before its object, a determiner at most between ("email them", "email our guests"):
    // "email" is a noun far more often ("email addresses of our staff", "emails from customers"); subscribers
    // and members are a mailing list's (email marketing). Sending one is in NEED_PATTERNS below.
    capability: 'email-sending',
    terms: 'email transactional',
    verbs: ['email', 'e mail', 'emailing'],
    pronouns: ['them', 'him', 'her', 'everyone', 'everybody'],
    nouns: PEOPLE.split(' ')
      .filter((noun) => !['subscribers', 'members', 'group', 'class', 'whole'].includes(noun))
      .concat(['users', 'user', 'guest', 'buyers', 'attendees']),
    more: [],
    gap: 1,
  },
  {
    // Drawing something new: image generation from a prompt.
    capability: 'image-generation',
    terms: 'image prompt',
    verbs: ['draw'],
    pronouns: ['me'],
    nouns: 'picture pictures logo cartoon image illustration drawing portrait sketch poster'.split(' '),
    more: [],
  },
];
/** Languages besides the six listed by name in CAPABILITY_SYNONYMS, read as translation after in, into, from or to. */
const LANGUAGES = (
  'portuguese italian dutch russian arabic korean hindi polish swedish turkish greek hebrew vietnamese thai indonesian ukrainian ' +
  'czech danish norwegian finnish hungarian romanian persian urdu bengali swahili tagalog malay catalan'
).split(' ');

/** Per need verb, "the verb, up to three words, one of its objects" (on a normalized query). */
const NEED_PATTERNS = [
  ...NEED_VERBS.filter((need) => need.verbs.length > 0).map((need) => ({
    capability: need.capability,
    terms: need.terms,
    // Not after a determiner, where the word is a noun ("got a text saying her parcel is held"); "that" and "her"
    // often come before the verb itself ("an API that signs documents", "help her sign the lease").
    pattern: new RegExp(
      `(?:^| )(?<!(?:^| )(?:a|an|the|this|my|your|his|our|their|another|each|every|no|one) )(?:${need.verbs.join('|')})${need.particles ? `(?! (?:${need.particles.join('|')})(?: |$))` : ''}(?: [a-z0-9]+){0,${need.gap ?? 3}}? (?:${[...need.pronouns, ...need.nouns].join('|')})(?= |$)`,
    ),
  })),
  // Sending an email ("send a password reset email", "send welcome emails"), not something sent by email
  // ("send the invoice by email": the invoice is the need).
  // Not "push notifications instead of emails", "slack alerts for new emails".
  { capability: 'email-sending', pattern: /(?:^| )send(?: (?!by |instead |of |for |not )[a-z]+){0,4} e ?mails?(?= |$)/ },
  // An invoice made or sent to someone ("send the bakery an invoice", "create and email an itemized invoice"), not one
  // received or read ("the VAT number on his invoice", "our invoices are HTML templates", "when suppliers send us
  // invoices", "an issue with the invoice").
  { capability: 'invoicing', pattern: /(?:^| )(?:send(?! (?:us|me) )|create|email|generate)(?: [a-z0-9]+){0,4}? invoices?(?= |$)/ },
  // Whether an address is real or throwaway, or will receive mail: email validation (not made-up data to fill a demo).
  {
    capability: 'email-validation',
    pattern:
      /^(?!(?:.* )?(?:scam|scams|phishing|spam)(?: |$)).*(?:^| )(?:is|are) (?:the|this|that|these|those|their|his|her|its) e ?mails?(?! from )(?: address(?:es)?)?(?: [a-z]+){0,5} (?:real|genuine|valid|fake|legit)(?= |$)/,
  },
  {
    capability: 'email-validation',
    // A bare "address" only after throwaway, disposable or burner ("a temporary address while I'm abroad" is a postal one).
    pattern:
      /(?:^| )(?:throwaway|disposable|temporary|burner)(?: [a-z0-9]+){0,2} (?:e ?mails?|e ?mail address(?:es)?|inboxes)(?= |$)|(?:^| )(?:throwaway|disposable|burner)(?: [a-z0-9]+){0,2} address(?:es)?(?= |$)/,
  },
  { capability: 'email-validation', pattern: /(?:^| )(?:actually|really) (?:receive|get) (?:e ?)?mail(?= |$)/ },
  // What the press reports about something: news (not "reported as a scam", "the bugs reported this week").
  {
    capability: 'news',
    pattern:
      /(?:^| )(?:being|been|press|papers|media) reported (?:about|this week|today|lately|recently|in the press|in the news)(?= |$)|(?:^| )reported about(?= |$)/,
  },
  // A day asked about as a day off: public holidays.
  {
    capability: 'public-holidays',
    // Not someone taking one ("because he is taking a day off on Friday").
    pattern:
      /(?:^| )(?:is|are|was) (?:(?!taking |having |takes |has )[a-z0-9]+ ){0,6}(?:a|an) (?:day off|public holiday|bank holiday|stat holiday)(?= |$)/,
  },
  // A photo to license: stock media.
  { capability: 'stock-media', pattern: /(?:^| )(?:photo|photos|image|images|picture|pictures)(?: [a-z]+){0,6} (?:we|i) can license(?= |$)/ },
  { capability: 'stock-media', pattern: /(?:^| )licensed(?: [a-z]+){0,2} (?:photo|photos|image|images|picture|pictures)(?= |$)/ },
  // A link people download files from, or an online folder others open too: file sharing.
  {
    capability: 'file-sharing',
    pattern: /(?:^| )(?:link|links) to download(?= |$)|(?:^| )(?:online|shared) folder(?: [a-z]+){0,3} (?:can|could) (?:open|see|access)(?= |$)/,
  },
  // Something people scan with their phone or point its camera at: a QR code (not a document scanned to read it,
  // "users point their phone camera at a plant and the app names it").
  {
    capability: 'qr-codes',
    pattern:
      /(?:^| )(?:people|customers|guests|visitors|diners|users) (?:can )?scan (?:it|them|with|to)(?= |$)|(?:^| )(?:people|customers|guests|visitors|diners|users|they) point (?:their|a) (?:phone |phones )?cameras? at (?:it|them)$/,
  },
  // Whether a sent email arrived: the sending service's delivery events.
  {
    capability: 'email-sending',
    pattern:
      /(?:^| )(?:reached|reach|reaches|landed in|arrived in) (?:her|his|their|my|your|the|our) inbox(?= |$)|(?:^| )bounced or (?:was |were )?(?:actually )?delivered(?= |$)/,
  },
  // Prepaid phone credit sent to someone: mobile top-up.
  {
    capability: 'mobile-top-up',
    pattern:
      /(?:^| )(?:phone|mobile|prepaid|airtime) credit(?= |$)(?! cards?(?: |$))|(?:^| )(?:send|sends|top up) (?:[a-z0-9]+ ){0,4}(?:of )?airtime(?= |$)/,
  },
  // Paying people into their bank accounts: payouts.
  { capability: 'payouts', pattern: /(?:^| )pay (?:[a-z0-9]+ ){0,6}(?:into|to) their bank accounts?(?= |$)/ },
  // Whether a number can receive texts: phone number look-up (the line's type).
  { capability: 'phone-lookup', pattern: /(?:^| )number(?: [a-z]+){0,2} (?:can|could) (?:actually )?receive (?:texts|sms)(?= |$)/ },
  // A bank account number checked before paying it: IBAN validation.
  { capability: 'iban-validation', pattern: /(?:^| )(?:check|verify|validate)(?: [a-z]+){0,3} bank account numbers?(?= |$)/ },
  // Someone alerted when a system goes down: on-call alerting (not "a maintenance page when the site is down", "keep the
  // app working offline if the server goes down").
  {
    capability: 'on-call-alerting',
    pattern:
      /(?:^| )(?:alert|alerts|ping|page|wake|tell|text|call|ring|notify|warn)(?: [a-z]+){0,3} (?:when|if) (?:a |the |our |my )?(?:[a-z]+ )?(?:server|servers|site|website|app|database|system) (?:goes|go) down(?= |$)|(?:^| )(?:when|if) (?:a |the |our |my )?(?:[a-z]+ )?(?:server|servers|site|website|app|database|system) (?:goes|go) down(?: [a-z0-9]+){0,4} (?:keep )?(?:alert|alerting|ping|pinging|page|paging|wake|waking|call|calling|ring|ringing|text|texting)(?= |$)/,
  },
  // A product photo's background cut away: background removal.
  {
    capability: 'background-removal',
    pattern:
      /(?:^| )cut (?:out|away)(?: [a-z]+){0,4} (?:of|from) (?:my |our |the )?(?:[a-z]+ )?(?:photo|photos|image|images|picture|pictures)(?= |$)/,
  },
  // Reviews or comments sorted by how people feel: sentiment analysis.
  {
    capability: 'sentiment-analysis',
    // Not "posts for our happy hour", "posts wishing our followers a happy new year".
    pattern:
      /(?:^| )(?:reviews|comments|feedback|tweets|posts)(?: [a-z0-9]+){0,6} (?:positive|negative|happy(?! (?:hour|new year|birthday|holidays|easter|christmas)(?: |$))|angry|neutral)(?= |$)/,
  },
  // What shares closed at, a stock's price: stock quotes.
  { capability: 'stock-quotes', pattern: /(?:^| )(?:shares|stock|stocks) (?:close|closed|closing|trading|traded|price|prices)(?= |$)/ },
  // Giving something away for free: giveaways (not "give away the ending", "give the prize away to them").
  {
    capability: 'giveaways',
    pattern: /(?:^| )giv(?:e|es|ing) (?:[a-z0-9]+ ){0,4}away (?:free|for free)(?= |$)|(?:^| )giv(?:e|es|ing) away (?:[a-z]+ ){0,3}for free(?= |$)/,
  },
  // The order a van should visit its stops in: route optimization.
  {
    capability: 'route-optimization',
    pattern: /(?:^| )(?:what|which|best) order (?:should|to|do|would)(?: [a-z]+){0,4} (?:visit|deliver|drive)(?= |$)/,
  },
  // Places people walk to or look for near somewhere: places search.
  {
    capability: 'places-search',
    pattern:
      /(?:^| )(?:pharmacy|pharmacies|chemist|chemists|supermarket|supermarkets|atm|atms|petrol station|petrol stations|gas station|gas stations|bakery|bakeries|pub|pubs) (?:near|nearby|close to|around|i can walk to|within walking distance)(?= |$)|(?:^| )which (?:[a-z]+ ){1,2}can (?:i|we) walk to(?= |$)/,
  },
  // What a band played at a show ("which songs did Coldplay play at their Wembley show"): its setlist.
  // Not what someone played themselves ("what did I play on Spotify last week").
  { capability: 'setlists', pattern: /(?:^| )(?:what|which songs|what songs) did (?!(?:i|we|you) )(?:[a-z0-9]+ ){1,4}play (?:at|in)(?= |$)/ },
  // Someone who has a symptom ("my toddler has a 39 degree fever and a rash", "has had a cough for a week"): a
  // symptom checker (not "we've got cabin fever", "World Cup fever", "a rash decision", "a rash of orders", "cough
  // syrup prices", "help with the headache of parsing dates").
  {
    capability: 'symptom-checker',
    pattern:
      /(?:^| )(?:has|have|had|got|having|with)(?: [a-z0-9]+){0,3}? (?<!(?:cabin|cup|spring|gold|football|election|night|the) )(?:fever|rash(?! of )|rashes|cough|headache|headaches|sore throat|vomiting|diarrhea|diarrhoea|chest pain|stomach ache|earache|nausea)(?= |$)(?! (?:decision|decisions|syrup|drops)(?: |$))/,
  },
  // Checking an address itself ("an email verification service"), not a code, a link or a step that confirms a sign-up
  // ("require email verification before users can log in").
  {
    capability: 'email-validation',
    pattern:
      /^(?!(?:.* )?(?:before|log in|login)(?: |$)).*(?:^| )e ?mail (?:address )?verification(?! codes?(?: |$)| links?(?: |$)| emails?(?: |$)| steps?(?: |$)| flows?(?: |$))/,
  },
  // A link to pay sent to someone ("send students a link to pay the deposit"), not one received ("a text with a
  // link to pay a toll: is it a scam"); a payment link made, not one asked about ("is this payment link legit").
  {
    capability: 'card-payments',
    pattern:
      /(?:^| )(?<!(?:^| )(?:a|an|the|this|that|my|your|his|her|our|their) )(?:send|text|email|give|share)(?: [a-z]+){0,3} (?:a )?link (?:to pay|so (?:that )?(?:they|he|she|people|customers) can pay)(?= |$)/,
  },
  { capability: 'card-payments', pattern: /(?:^| )(?:create|make|send|generate|share)(?: [a-z]+){0,2} payment links?(?= |$)/ },
  // Something put in someone's calendar: calendar events (not "a free hour in my calendar": free/busy).
  {
    capability: 'calendar-events',
    pattern:
      /(?:^| )(?:put|puts|add|adds|adding|schedule|pop|block)(?: [a-z0-9]+){0,10}? (?:in|into|to|on) (?:my|our|their|his|her|the|a)(?: [a-z]+)? calendar(?= |$)/,
  },
  // Another way to say a word, unless in another language ("another way to say thank you in Japanese").
  {
    capability: 'dictionary',
    pattern: new RegExp(
      `(?:^| )another way to say (?!.* (?:in|into) (?:${['english', 'french', 'spanish', 'german', 'chinese', 'japanese', ...LANGUAGES].join('|')})(?: |$))`,
    ),
  },
  // Written words made audio, unless a video or a recording is what is turned into audio.
  {
    capability: 'text-to-speech',
    pattern: /^(?!(?:.* )?(?:video|videos|mp4|movie|film|clip|clips|recording|recordings)(?: |$)).*(?:^| )into (?:an )?audio(?: |$)/,
  },
  // The whole task asks what one word means ("what does petrichor mean"): a dictionary.
  { capability: 'dictionary', pattern: /^what (?:does|do) (?:the word )?(?!(?:it|this|that|these|those) )[a-z]+ mean$/ },
  // Written words read out ("read blog posts aloud"): speech synthesis; not someone reading aloud to be heard or scored.
  {
    capability: 'text-to-speech',
    pattern:
      /^(?!(?:.* )?(?:pronunciation|pronounce|transcribe|transcript|transcription|record|records|recording|score|scores|grade|grades)(?: |$)).*(?:^| )read(?: [a-z0-9]+){1,4} (?:aloud|out loud)(?= |$)/,
  },
  // Text, names or figures taken out of a photo or a scan: OCR ("extract dish names and prices from photos of paper menus"),
  // not a photo's metadata ("extract the capture dates and gps details from uploaded photos").
  {
    capability: 'ocr',
    pattern:
      /^(?!(?:.* )?(?:metadata|exif|gps|geotag|geotags|location|locations|colors|colours)(?: |$)).*(?:^| )extract(?: [a-z]+){0,3} (?:text|names|prices|numbers|words|details|totals|dates|addresses)(?: [a-z]+){0,3} from (?:the |a |an |my |our |their )?(?:[a-z]+ )?(?:photos?|images?|pictures?|scans?|screenshots?)(?= |$)/,
  },
  // Pictures made smaller: image resizing ("resize and compress the images users upload"); not a container image
  // ("shrink our docker image size") nor a cost.
  {
    capability: 'image-resizing',
    pattern:
      /^(?!(?:.* )?(?:docker|container|containers|vm|ami|disk|cost|costs|bill)(?: |$)).*(?:^| )(?<!(?:a|an|the) )(?:resize|resizing|shrink|compress|compressing|downscale)(?: [a-z0-9]+){0,3}? (?:images?|photos?|pictures?|thumbnails?|jpe?g|png)(?= |$)/,
  },
  // Photos labelled by what they show: image recognition ("auto-tag listing photos"); not people tagged in a photo, a
  // container image tagged with a version, or a shipping label's image.
  {
    capability: 'image-recognition',
    pattern:
      /^(?!(?:.* )?(?:docker|container|containers|registry|version|commit|sha|release|shipping|postage|parcel|friends?|people|someone|me|him|her|them)(?: |$)).*(?:^| )(?<!(?:a|an|the) )(?:tag|label|classify|categori[sz]e)(?: [a-z]+){0,2}? (?:photos?|images?|pictures?)(?= |$)/,
  },
  // What was said in a workplace's chat: its messages (not a chat a chart or an alert is posted or shared to: there the
  // chart is the need).
  {
    capability: 'team-chat',
    pattern: /(?:^| )(?:said|wrote|mentioned|discussed) in (?:our|the|my|their) (?:work|team|company|office) chat(?= |$)/,
  },
  // How long a trip from one place to another takes: routing ("how long's it gonna take me to get from bondi to the
  // airport"), not how long something else takes ("how long will it take to get a visa").
  {
    capability: 'routing',
    pattern: /(?:^| )how long (?:will |does |would |is )?it (?:going to )?take(?: me| us| them| him| her)? to (?:get|drive|travel|go) from(?= |$)/,
  },
  // A customer's card charged: card payments ("charge the hendersons card for the two hundred they owe me").
  { capability: 'card-payments', pattern: /(?:^| )charge (?:the |a |my |our |their |his |her |this )?(?:[a-z]+ )?(?:card|cards)(?= |$)/ },
  // A phone's or an account's list of people; not a saved delivery address picked at checkout.
  {
    capability: 'contacts',
    pattern: /^(?!(?:.* )?(?:shipping|delivery|checkout|postal|billing)(?: |$)).*(?:^| )address book(?= |$)/,
  },
  // A CAPTCHA on one's own form: bot protection; not one in the way of a scraper.
  {
    capability: 'bot-protection',
    pattern: /^(?!(?:.* )?(?:scrape|scraping|scraper|crawl|crawler|behind|bypass|solve|solving|solver)(?: |$)).*(?:^| )(?:re)?captchas?(?= |$)/,
  },
  // The dictionary also answers a terse query that is one word to define, or its synonyms ("define serendipity",
  // "synonyms for happy"); not something a developer defines ("define a schema", "define permissions").
  {
    capability: 'dictionary',
    pattern:
      /^(?:define (?:the word )?(?!(?:schema|schemas|permissions?|roles?|routes?|types?|variables?|endpoints?|policy|policies|scopes?|fields?|models?|metrics?|requirements?|workflows?|pipelines?|interfaces?|functions?|classes|class|constants?|rules?|env|environment|tables?|columns?|indexes|index|events?|goals?|kpis?|okrs?|sla|slas|success|done)$)|(?:synonyms?|antonyms?) (?:for|of) (?:the word )?)[a-z]+$/,
  },
];

export const CAPABILITY_SYNONYMS: ReadonlyArray<readonly [string, string]> = [
  ...TEAMS.flatMap((team) => teamsBy(team).map((name) => [name, team.terms] as const)),
  ...ARTISTS.map((name) => [name, 'concerts events artist'] as const),
  ...NEED_VERBS.flatMap((need) => need.more.map((phrase) => [phrase, need.terms] as const)),
  ['text message', 'sms messaging'],
  ['text messages', 'sms messaging'],
  ['texting', 'sms messaging'],
  ['sms', 'sms messaging'],
  ['phone call', 'voice call telephony'],
  ['call a phone', 'voice call telephony'],
  ['phone number', 'phone number lookup'],
  ['validate a phone', 'phone number validation lookup'],
  ['coordinates', 'geocoding geocode latitude longitude'],
  ['latitude', 'geocoding geocode'],
  ['address', 'address geocoding'],
  ['where is', 'geolocation location'],
  ['ip address', 'ip geolocation'],
  ['map', 'maps geocoding'],
  ['directions', 'routing directions route'],
  ['route', 'routing directions'],
  ['weather', 'weather forecast'],
  ['rain', 'weather forecast precipitation'],
  ['temperature', 'weather forecast temperature'],
  ['translate', 'translation translate language'],
  ['translation', 'translation translate language'],
  ['another language', 'translation language'],
  ['language', 'language'],
  ['english', 'language translation'],
  ['french', 'language translation'],
  ['spanish', 'language translation'],
  ['german', 'language translation'],
  ['chinese', 'language translation'],
  ['japanese', 'language translation'],
  // More languages, named as the language of a text ("in Portuguese", "into Thai"), not as a cuisine or a verb
  // ("thai restaurants", "polish my resume"): LANGUAGES above.
  ...LANGUAGES.flatMap((language) => ['in', 'into', 'from', 'to'].map((before) => [`${before} ${language}`, 'language translation'] as const)),
  ['email', 'email mail'],
  ['e-mail', 'email mail'],
  ['newsletter', 'email marketing campaign'],
  ['mailing list', 'email marketing list'],
  ['payment', 'payment payments charge'],
  ['payments', 'payment payments charge'],
  ['pay', 'payment payments'],
  ['credit card', 'payment card charge'],
  ['invoice', 'invoice billing'],
  ['subscription', 'subscription billing'],
  ['exchange rate', 'currency exchange rates forex'],
  ['currency', 'currency exchange forex'],
  ['convert money', 'currency exchange conversion'],
  ['stock', 'stock market quote finance'],
  ['stock price', 'stock market quote finance'],
  ['shares', 'stock market'],
  ['crypto', 'cryptocurrency bitcoin crypto'],
  ['bitcoin', 'cryptocurrency bitcoin blockchain'],
  ['photo', 'image photo'],
  ['photos', 'image photo'],
  ['picture', 'image photo'],
  ['image', 'image'],
  ['resize', 'image resize transform'],
  ['video', 'video'],
  ['movie', 'movie film'],
  ['film', 'movie film'],
  ['music', 'music song track artist'],
  ['song', 'music song track'],
  ['podcast', 'podcast audio'],
  ['speech', 'speech voice audio'],
  ['text to speech', 'speech synthesis tts voice'],
  ['transcribe', 'transcription speech recognition'],
  ['transcript', 'transcription speech'],
  ['sentiment', 'sentiment analysis nlp'],
  ['summarize', 'summarization nlp text'],
  ['chatbot', 'chat conversation ai'],
  ['ai', 'ai machine learning model'],
  ['gpt', 'openai completion model'],
  ['generate text', 'completion language model openai'],
  ['news', 'news articles headlines'],
  ['headlines', 'news articles headlines'],
  ['article', 'articles news'],
  ['book', 'books'],
  ['books', 'books isbn'],
  ['recipe', 'recipe food cooking'],
  ['food', 'food recipe nutrition'],
  ['calories', 'nutrition food'],
  ['flight', 'flight airline airport'],
  ['flights', 'flight airline airport'],
  ['hotel', 'hotel travel booking'],
  ['train', 'train rail transport'],
  ['bus', 'transit transport'],
  ['public transport', 'transit transport'],
  ['shipping', 'shipping shipment tracking parcel'],
  ['package', 'shipment tracking parcel'],
  ['parcel', 'shipment tracking parcel'],
  ['track a shipment', 'shipment tracking'],
  ['calendar', 'calendar events'],
  ['meeting', 'meeting calendar video conference'],
  ['schedule', 'calendar scheduling'],
  ['todo', 'tasks project'],
  ['task', 'tasks'],
  ['tasks', 'tasks project'],
  ['issue', 'issues'],
  ['repository', 'repository repos git'],
  ['repo', 'repository repos git'],
  ['pull request', 'pull requests git'],
  ['code', 'code repository'],
  ['chat', 'chat message channel'],
  ['channel', 'channel message'],
  ['post a message', 'message chat channel'],
  ['tweet', 'tweets twitter'],
  ['social media', 'social posts'],
  ['store files', 'storage file upload'],
  ['upload', 'upload file storage'],
  ['file', 'file files storage'],
  ['files', 'file files storage'],
  ['document', 'documents files'],
  ['pdf', 'pdf document'],
  ['spreadsheet', 'spreadsheet sheets'],
  ['crm', 'crm contacts deals'],
  ['customer', 'customers crm'],
  ['contacts', 'contacts crm'],
  ['lead', 'leads crm'],
  ['support ticket', 'tickets helpdesk support'],
  ['ticket', 'tickets helpdesk support'],
  ['shop', 'ecommerce store products orders'],
  ['online store', 'ecommerce store products orders'],
  ['product', 'products'],
  ['orders', 'orders ecommerce'],
  ['inventory', 'inventory stock products'],
  ['domain', 'domain dns'],
  ['dns', 'dns domain records'],
  ['website', 'website web'],
  ['screenshot', 'screenshot web page capture'],
  ['url', 'url link'],
  ['shorten', 'url shortener short links'],
  ['short link', 'url shortener links'],
  ['qr', 'qr code barcode'],
  ['barcode', 'barcode'],
  ['password', 'password security'],
  ['breach', 'breach pwned security'],
  ['malware', 'malware virus security scan'],
  ['virus', 'malware virus scan'],
  ['vulnerability', 'vulnerability security cve'],
  ['authenticate users', 'authentication identity login'],
  ['login', 'authentication identity login'],
  ['verify identity', 'identity verification kyc'],
  ['verify an email', 'email verification validation'],
  ['validate an email', 'email verification validation'],
  ['holiday', 'holidays calendar'],
  ['holidays', 'holidays public'],
  ['time zone', 'timezone time'],
  ['timezone', 'timezone time'],
  ['country', 'countries country'],
  ['countries', 'countries country'],
  ['population', 'population statistics census data'],
  ['statistics', 'statistics data'],
  ['government data', 'open data government'],
  ['space', 'nasa space'],
  ['asteroid', 'asteroids nasa neo'],
  ['mars', 'mars nasa rover'],
  ['earthquake', 'earthquake seismic'],
  ['air quality', 'air quality pollution'],
  ['aqi', 'air quality pollution'],
  ['pollution', 'air quality pollution'],
  ['comic', 'comic comics'],
  ['joke', 'jokes humor'],
  ['quote', 'quotes'],
  ['dictionary', 'dictionary definitions words'],
  ['definition', 'dictionary definitions'],
  ['synonym', 'thesaurus synonyms words'],
  ['wikipedia', 'wikipedia wiki encyclopedia'],
  ['encyclopedia', 'wikipedia encyclopedia'],
  ['sports', 'sports scores games'],
  ['football', 'football soccer sports'],
  ['soccer', 'football soccer sports'],
  ['game', 'games gaming'],
  ['games', 'games gaming'],
  ['analytics', 'analytics tracking'],
  ['monitor', 'monitoring uptime'],
  ['uptime', 'monitoring uptime'],
  ['logs', 'logs logging'],
  ['error tracking', 'errors monitoring exceptions'],
  ['deploy', 'deployment hosting'],
  ['server', 'servers cloud compute'],
  ['virtual machine', 'compute instances virtual machines'],
  ['container', 'containers kubernetes'],
  ['database', 'database'],
  ['queue', 'queue messaging'],
  ['notification', 'notifications push'],
  ['push notification', 'push notifications mobile'],
  ['fax', 'fax'],
  ['sign a document', 'esignature signature envelope'],
  ['signature', 'esignature signature'],
  ['job', 'jobs'],
  ['jobs', 'jobs careers'],
  ['real estate', 'property real estate'],
  ['car', 'vehicle car'],
  ['vin', 'vehicle vin'],
  ['health', 'health medical'],
  ['medicine', 'drug medical'],
  ['drug', 'drugs medical'],
  ['gene', 'genes genomics'],
  ['protein', 'proteins'],
  ['chemistry', 'chemical compounds'],
  ['email address', 'email'],
];

/** Words that carry no capability: dropped from discovery queries (kept in plain search). */
export const DISCOVERY_STOPWORDS = new Set(
  (
    'a an the to of for in on at by with from into onto and or but is are be been being it its this that these those i me my we our you your ' +
    'he she they them their his her want wants need needs would like please help can could should will shall may might must do does did ' +
    'get gets got find finds some any all each every about how what which who whom whose when where why api apis service services ' +
    'using use used via thing things something someone one two way able let lets make makes'
  ).split(' '),
);

/**
 * Phrases that state a task's need outright, each naming the capability (capabilities.ts) that does it:
 * its members are candidates whatever else the task's words say (catalog.ts, NEED_SIMILARITY). A need verb is
 * read with its object by NEED_PATTERNS (so that the noun's senses do not fire: "text my landlord" but not
 * "extract the text" or "got a text saying"); here first the need verbs' own phrases ("send a text", "read
 * aloud"), also in CAPABILITY_SYNONYMS for the word ranking; then everyday names of a need ("video call",
 * "umbrella", "scannable code"). Where two needs meet ("a code by text") the more specific phrase is listed as well.
 * Written from the tuning sets' misses (docs/DISCOVERY.md, "a seventh session"): on a set written after
 * them they gained one task in 33.
 */
export const NEED_PHRASES: ReadonlyArray<readonly [string, string]> = [
  // A need verb with its object is NEED_PATTERNS' (not after a determiner: "the email a customer gave us"); its own phrases here.
  ...NEED_VERBS.flatMap((need) => need.more.map((phrase) => [phrase, need.capability] as const)),
  // The air quality index, as a terse query names it ("aqi beijing today").
  ['aqi', 'air-quality'],
  // Signatures collected electronically.
  ...['e signature', 'e signatures', 'esignature', 'esignatures', 'electronic signature', 'electronic signatures'].map(
    (phrase) => [phrase, 'e-signature'] as const,
  ),

  ['video call', 'video-meetings'],
  ['video calls', 'video-meetings'],
  ['video meeting', 'video-meetings'],
  ['video conference', 'video-meetings'],
  ['ring my', 'voice-calls'],
  ['ring them', 'voice-calls'],
  ['ring our', 'voice-calls'],
  ['phone my', 'voice-calls'],
  ['their share', 'payouts'],
  ['their cut', 'payouts'],
  ['pay out', 'payouts'],
  ['split the money', 'payouts'],
  ['split payments', 'payouts'],
  ['all of us are free', 'free-busy'],
  ['we are all free', 'free-busy'],
  ['everyone is free', 'free-busy'],
  ['nothing booked', 'free-busy'],
  ['free slot', 'free-busy'],
  ['free slots', 'free-busy'],
  ['tell me in english', 'translation'],
  ['in english what', 'translation'],
  ['mean in english', 'translation'],
  ['means in english', 'translation'],
  ['into english', 'translation'],
  ['code by text', 'one-time-codes'],
  ['login code', 'one-time-codes'],
  ['verification code', 'one-time-codes'],
  ['need an umbrella', 'weather-forecast'],
  // Asking whether it will rain or stay dry: a forecast.
  ['will it rain', 'weather-forecast'],
  ['will it freeze', 'weather-forecast'],
  ['going to freeze', 'weather-forecast'],
  ['going to rain', 'weather-forecast'],
  ['will it snow', 'weather-forecast'],
  ['going to snow', 'weather-forecast'],
  ['stay dry', 'weather-forecast'],
  ['be pouring', 'weather-forecast'],
  ['take an umbrella', 'weather-forecast'],
  ['bring an umbrella', 'weather-forecast'],
  ['to dos', 'task-management'],
  ['to do list', 'task-management'],
  ['todo list', 'task-management'],
  ['scannable code', 'qr-codes'],
  ['qr code', 'qr-codes'],
  ['made up names', 'fake-data'],
  ['fake names', 'fake-data'],
  ['who registered', 'whois'],
  ['my parcel', 'shipping'],
  ['our parcel', 'shipping'],
  ['the parcel', 'shipping'],
  ['my parcels', 'shipping'],
  ['parcel tracking', 'shipping'],
  // Who made a film: film information.
  ['who directed', 'movies'],
  // Radio to listen to: radio stations (a kind counted only when stated).
  ['radio station', 'radio-stations'],
  ['radio stations', 'radio-stations'],
  ['public radio', 'radio-stations'],
  ['radio broadcaster', 'radio-stations'],
  // Paying in parts or later: pay later (a kind counted only when stated).
  ['interest free instalments', 'pay-later'],
  ['interest free installments', 'pay-later'],
  ['pay in instalments', 'pay-later'],
  ['pay in installments', 'pay-later'],
  ['pay later', 'pay-later'],
  ['buy now pay later', 'pay-later'],
  // Ingredients to cook with: recipes.
  ['what can i make for dinner', 'recipes'],
  ['what can i make for lunch', 'recipes'],
  ['what can i make for breakfast', 'recipes'],
  ['what can i cook', 'recipes'],
  ['what can we make for dinner', 'recipes'],
  ['what can we cook', 'recipes'],
  // Words to keep out of posts: content moderation.
  ['swear words', 'content-moderation'],
  ['profanity', 'content-moderation'],
  ['offensive language', 'content-moderation'],
  // Someone on duty woken for an incident: on-call alerting.
  ['whoever is on duty', 'on-call-alerting'],
  ['whoever is on call', 'on-call-alerting'],
  ['whoever on duty', 'on-call-alerting'],
  ['whoever on call', 'on-call-alerting'],
  // The songs of a show.
  ['setlist', 'setlists'],
  ['set list', 'setlists'],
  // Somewhere to eat near a place: local places search (not "took place near", "a place near campus to rent").
  ['restaurant near', 'places-search'],
  ['restaurants near', 'places-search'],
  ['cafe near', 'places-search'],
  ['cafes near', 'places-search'],
  ['coffee shop near', 'places-search'],
  ['somewhere to eat', 'places-search'],
  ['places to eat near', 'places-search'],
  ['sights near', 'places-search'],
  ['museums near', 'places-search'],
  ...'pizza sushi burger coffee lunch breakfast brunch dinner food'
    .split(' ')
    .flatMap((food) => [`${food} place near`, `${food} places near`].map((phrase) => [phrase, 'places-search'] as const)),
  // Being driven somewhere: ride hailing (not "upload a ride to Strava", "a cab file").
  ['need a ride', 'ride-hailing'],
  ['get a ride', 'ride-hailing'],
  ['book a ride', 'ride-hailing'],
  ['a ride home', 'ride-hailing'],
  ['a taxi', 'ride-hailing'],
  ['a cab to', 'ride-hailing'],
  ['a cab from', 'ride-hailing'],
  ['book a cab', 'ride-hailing'],
  ['call a cab', 'ride-hailing'],
  ['get me a car to', 'ride-hailing'],
  ['get me a car from', 'ride-hailing'],
  // Asking about a word: a dictionary or thesaurus (not "the OpenAPI definition of my service").
  ['another word for', 'dictionary'],
  ['synonym for', 'dictionary'],
  ['synonyms for', 'dictionary'],
  ['synonyms of', 'dictionary'],
  ['definition of the word', 'dictionary'],
  ['meaning of the word', 'dictionary'],
  ['rhymes with', 'dictionary'],
  ['rhyme with', 'dictionary'],
  // Written words made audio: audio versions (the other way is speech to text; "into audio" in NEED_PATTERNS).
  ['audio version', 'text-to-speech'],
  ['audio versions', 'text-to-speech'],
  // Whether a link is safe: URL safety (not fraud scoring of a payment; a file "safe to open" is not a link).
  ['safe to click', 'url-safety'],
  ['link safe to open', 'url-safety'],
  ['scam link', 'url-safety'],
  ['phishing link', 'url-safety'],
  ['link a scam', 'url-safety'],
  ['link a known scam', 'url-safety'],
  ['link is a scam', 'url-safety'],
  // Being paid by card: card payments (not a payout to others, not cryptocurrency; "my card payments" are spending;
  // links to pay and payment links are NEED_PATTERNS').
  ['pay by card', 'card-payments'],
  ['accept card payments', 'card-payments'],
  ['take card payments', 'card-payments'],
  // Something put in a calendar is NEED_PATTERNS' (finding when people are free is free/busy).
  ['calendar invite', 'calendar-events'],
  ['calendar invites', 'calendar-events'],
  // Getting somewhere by road: routing; many stops over several vehicles: route optimization (not "which stops" a bus makes).
  ['driving directions', 'routing'],
  ['driving distance', 'routing'],
  ['the drive from', 'routing'],
  ['which highways', 'routing'],
  ['order of stops', 'route-optimization'],
  ['delivery routes', 'route-optimization'],
  // Asking a client to pay for work: invoicing (made or sent invoices are NEED_PATTERNS').
  ['bill a client', 'invoicing'],
  ['bill my client', 'invoicing'],
  ['bill the client', 'invoicing'],
  ['bill a customer', 'invoicing'],
  ['bill my clients', 'invoicing'],
  // Addresses that would bounce: email validation (not sending to them).
  ['would bounce', 'email-validation'],
  ['disposable email', 'email-validation'],
  ['throwaway inboxes', 'email-validation'],
  ['throwaway email', 'email-validation'],
  // A photo to license: stock media.
  ['stock photo', 'stock-media'],
  ['stock photos', 'stock-media'],
  ['licensed photo', 'stock-media'],
];

/** The teams of the leagues with a capability of their own, and the artists: named things that imply a kind. */
const NAMED: ReadonlyArray<readonly [string, string]> = [
  ...TEAMS.flatMap((team) => (team.capability === null ? [] : teamsBy(team).map((name) => [name, team.capability!] as const))),
  ...ARTISTS.map((name) => [name, 'live-events'] as const),
];

/**
 * A matcher of phrases on a normalized (lower-case, space-separated) query: only the phrases whose first
 * word is a word of the query are tried, and the values of those found come in the list's order.
 */
function phraseMatcher<T>(list: ReadonlyArray<readonly [string, T]>): (normalized: string) => T[] {
  const byFirstWord = new Map<string, number[]>();
  list.forEach(([phrase], at) => {
    const first = phrase.split(' ')[0]!;
    const places = byFirstWord.get(first);
    if (places) places.push(at);
    else byFirstWord.set(first, [at]);
  });
  return (normalized) => {
    const padded = ` ${normalized} `;
    const candidates: number[] = [];
    for (const word of new Set(normalized.split(' '))) candidates.push(...(byFirstWord.get(word) ?? []));
    candidates.sort((a, b) => a - b);
    return candidates.filter((at) => padded.includes(` ${list[at]![0]} `)).map((at) => list[at]![1]);
  };
}

const matchStated = phraseMatcher(NEED_PHRASES);
const matchNamed = phraseMatcher(NAMED);

/**
 * ISO 13616's check: the first four characters moved to the end, letters as 10-35, the number mod 97 is 1. A
 * written IBAN's match may run on into the next word ("BE71 0961 2345 6769 EUR"), so each shorter reading that
 * ends at one of its groups is checked too.
 */
function ibanChecks(text: string): boolean {
  for (let groups = text.split(' '); groups.length > 0; groups = groups.slice(0, -1)) if (ibanNumberChecks(groups.join(''))) return true;
  return false;
}

function ibanNumberChecks(iban: string): boolean {
  if (iban.length < 15 || iban.length > 34) return false;
  let rest = 0;
  for (const char of iban.slice(4) + iban.slice(0, 4)) {
    const value = char >= 'A' ? char.charCodeAt(0) - 55 : Number(char);
    rest = (value >= 10 ? rest * 100 : rest * 10) + value;
    rest %= 97;
  }
  return rest === 1;
}

/** ISBN-13's check digit: the digits weighed 1, 3, 1, ... sum to a multiple of 10. */
function isbn13Checks(text: string): boolean {
  const digits = text.replace(/[- ]/g, '');
  let sum = 0;
  for (let i = 0; i < 13; i++) sum += Number(digits[i]) * (i % 2 === 0 ? 1 : 3);
  return sum % 10 === 0;
}

/**
 * Words that put a flight designator ("LH 454") in its context, within IDENTIFIER_CONTEXT_CHARS of it: a train, a bus
 * line, a pull request or a product can look the same ("PR 1234 merged", "the 4K 120 Hz monitor").
 */
const FLIGHT_CONTEXT =
  /\b(?:flights?|fly|flying|flies|flew|plane|airport|airline|land|lands|landed|landing|depart|departs|departed|departing|departure|departures|arrive|arrives|arrived|arriving|arrival|arrivals|take off|takes off|took off|delayed|delays|boarding|on time|cancelled|canceled)\b/i;
/** A UK plate's: words of cars and their papers ("FY24 YTD revenue", "IE11 CSS grid" have the plate's form). */
const PLATE_CONTEXT =
  /\b(?:car|cars|plate|plates|number plate|reg|registration|registered|mot|taxed|tax|insured|insurance|vehicle|vehicles|van|motorbike|motorcycle|dvla)\b/i;
/** How far from an identifier (characters either way) its context words are looked for. */
const IDENTIFIER_CONTEXT_CHARS = 60;

/**
 * Identifiers a task quotes, told by their form on the task as typed (case and punctuation kept), each with
 * the kind of service that looks such an identifier up: an IP address, an IBAN (its check digits must hold),
 * an ISBN-13 (its check digit too), a flight designator among words of flying, a UK postcode, a registration
 * plate among words of cars, a VIN, a parcel's tracking number (UPS's, or the UPU's S10 form of the postal services),
 * a phone number written with its country code or in the North American form. Standard forms, not phrasings: like a
 * team's name (NAMED) each implies its kind ("send a text to +44 7700 900123 saying the table is ready" asks for
 * SMS); the `sure` ones count as a stated need would.
 */
const IDENTIFIER_FORMS: ReadonlyArray<{
  capability: string;
  pattern: RegExp;
  valid?: (match: string) => boolean;
  context?: RegExp;
  /**
   * A form only one kind of service looks up (a vehicle's plate or VIN, a parcel's tracking number): the task is
   * about what it identifies, and the kind counts as a stated need would (NEED_SIMILARITY), the closest kind in
   * meaning kept beside it. An IP address may be asked about for its place, its proxy or its abuse; a phone
   * number to look it up, text it or call it: those only imply their kind.
   */
  sure?: true;
}> = [
  { capability: 'ip-geolocation', pattern: /(?<![\d.])(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?![\d.]*\d)/ },
  {
    capability: 'ip-geolocation',
    pattern: /(?<![\w:])(?:[0-9a-f]{1,4}:){7}[0-9a-f]{1,4}(?![\w:])|(?<![\w:])(?:[0-9a-f]{1,4}:)+:(?:[0-9a-f]{1,4}(?::[0-9a-f]{1,4})*)?(?![\w:])/i,
  },
  { capability: 'iban-validation', pattern: /\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b/, valid: ibanChecks },
  { capability: 'books', pattern: /\b97[89](?:[- ]?\d){10}\b/, valid: isbn13Checks },
  // Not a quarter ("Q4 2025"); two digits and three letters are a UK plate ("AB12 CDE").
  {
    capability: 'flight-status',
    pattern: /\b(?!Q[1-4]\b)(?:[A-Z]{2}|[A-Z]\d|\d[A-Z]) ?(?:\d{2}(?! ?[A-Z]{3}\b)|\d{3,4})\b/,
    context: FLIGHT_CONTEXT,
  },
  // Not a size ("M2 8GB", "PS5 2TB").
  { capability: 'address-lookup', pattern: /\b[A-Z]{1,2}\d[A-Z\d]? (?!\d[KMGT]B\b)\d[A-Z]{2}\b/ },
  { capability: 'vehicle-records', pattern: /\b[A-Z]{2}\d{2} ?[A-Z]{3}\b/, context: PLATE_CONTEXT, sure: true },
  { capability: 'vehicle-records', pattern: /\b(?=(?:[A-HJ-NPR-Z]*\d){2})(?=(?:\d*[A-HJ-NPR-Z]){2})[A-HJ-NPR-Z\d]{17}\b/, sure: true },
  { capability: 'shipping', pattern: /\b1Z[0-9A-Z]{16}\b|\b[A-Z]{2}\d{9}[A-Z]{2}\b/, sure: true },
  {
    capability: 'phone-lookup',
    pattern: /(?<![\w+])\+\d{1,3}(?:[ .-]?\(?\d{1,5}\)?){2,5}(?![\w.-]?\d)|(?<![\w(])\(?\d{3}\)?[ .-]\d{3}[ .-]\d{4}(?![\w-])/,
  },
];

/** IDENTIFIER_FORMS with their patterns global, made once (matchAll copies the pattern, so sharing it is safe). */
const GLOBAL_IDENTIFIER_FORMS = IDENTIFIER_FORMS.map((form) => ({ ...form, pattern: new RegExp(form.pattern.source, `${form.pattern.flags}g`) }));

/** Per kind of service the identifiers a task quotes imply (IDENTIFIER_FORMS, on the task as typed), whether a sure form did. */
function quotedKinds(typed: string): Map<string, boolean> {
  const found = new Map<string, boolean>();
  for (const { capability, pattern, valid, context, sure } of GLOBAL_IDENTIFIER_FORMS) {
    if (found.get(capability) === true || (found.has(capability) && !sure)) continue;
    for (const match of typed.matchAll(pattern)) {
      const near = () =>
        context!.test(typed.slice(Math.max(0, match.index - IDENTIFIER_CONTEXT_CHARS), match.index + match[0].length + IDENTIFIER_CONTEXT_CHARS));
      if ((!valid || valid(match[0])) && (!context || near())) {
        found.set(capability, sure === true);
        break;
      }
    }
  }
  return found;
}

/** The kinds of service the identifiers a task quotes imply (IDENTIFIER_FORMS), on the task as typed; `sure` only the sure forms'. */
export function identifierNeeds(typed: string, sure = false): string[] {
  return [...quotedKinds(typed)].filter(([, isSure]) => !sure || isSure).map(([capability]) => capability);
}

/**
 * The capabilities (ids) a normalized query names: `stated`, by the wording of its need (NEED_PHRASES and
 * the need verbs' patterns: "text my team", "another word for"), and `named`, by a named thing (a team, an
 * artist, an identifier the task as typed quotes: IDENTIFIER_FORMS) that only implies a kind ("songs similar
 * to Radiohead" is not about concerts), of which `sure` are those a sure identifier form implies (a plate's vehicle
 * records). `all` is both.
 */
export function taskNeeds(normalized: string, typed?: string): { stated: string[]; named: string[]; sure: string[]; all: string[] } {
  const stated = new Set(matchStated(normalized));
  for (const { capability, pattern } of NEED_PATTERNS) if (pattern.test(normalized)) stated.add(capability);
  const quoted = typed === undefined ? new Map<string, boolean>() : quotedKinds(typed);
  const named = new Set([...matchNamed(normalized), ...quoted.keys()]);
  const sure = [...quoted].filter(([, isSure]) => isSure).map(([capability]) => capability);
  return { stated: [...stated], named: [...named], sure, all: [...new Set([...stated, ...named])] };
}

/** Longest-first phrase list, so "text message" wins over "message", each with its expansion terms. */
const matchSynonyms = phraseMatcher(
  [...CAPABILITY_SYNONYMS].sort((a, b) => b[0].length - a[0].length).map(([phrase, expansion]) => [phrase, expansion.split(' ')] as const),
);

/** Capability terms implied by a normalized (lower-case, space-separated) query, the longest phrases' first. */
export function expandCapabilities(normalized: string): string[] {
  const terms = matchSynonyms(normalized).flat();
  // A need verb with its object adds the words of its kind too ("text the whole team": sms, messaging).
  for (const need of NEED_PATTERNS) if ('terms' in need && need.pattern.test(normalized)) terms.push(...need.terms.split(' '));
  return [...new Set(terms)];
}
