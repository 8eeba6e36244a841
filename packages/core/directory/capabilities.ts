/**
 * The capability layer (issue 35): what kinds of service the catalog holds, each described in the
 * words of its own providers' documentation (descriptions, operation summaries and tags of the
 * APIs that do it; the source is named beside each), never in the words of anyone's tasks.
 *
 * Each capability has:
 * - `text`: a sentence or two written from those documents, embedded once per index load with the
 *   discovery model; a task close in meaning to it (cosine >= CAPABILITY_MIN_SIMILARITY) is taken
 *   to ask for the capability;
 * - `terms`: the catalog's words for it, which find its member APIs when the index loads: every API
 *   whose name, categories or description hold all of them, or one of whose operations does
 *   (an AI platform's image generation lives in one operation).
 */

export interface Capability {
  id: string;
  text: string;
  terms: string;
}

export const CAPABILITIES: readonly Capability[] = [
  // Amazon Polly ("synthesize speech from text"), Google Cloud Text-to-Speech ("synthesizes natural-sounding speech").
  {
    id: 'text-to-speech',
    text: 'Text to speech: synthesize natural-sounding speech from text, turning written text into spoken audio.',
    terms: 'speech synthesize',
  },
  // Amazon Transcribe, Rev.ai ("speech-text recognition"), Google Cloud Speech-to-Text.
  {
    id: 'speech-to-text',
    text: 'Speech to text: transcribe audio recordings and spoken words into written text transcripts.',
    terms: 'transcription',
  },
  // Weatherbit ("current air quality conditions"), Meteosource ("air quality data"), TfL ("air quality data feed"), OpenAQ.
  {
    id: 'air-quality',
    text: 'Air quality: current air quality conditions, air pollution and pollutant levels for a location.',
    terms: 'air quality',
  },
  // GoDaddy ("determine whether or not the specified domain is available for purchase"), Route 53 Domains ("checks the availability of one domain name"), apispot ("check domain availability").
  {
    id: 'domain-availability',
    text: 'Domain availability: check whether a domain name is available for purchase and registration.',
    terms: 'domain availability',
  },
  // Google Calendar ("returns free/busy information for a set of calendars"), Microsoft Graph getSchedule.
  { id: 'free-busy', text: 'Calendar free/busy: free/busy information for a set of calendars, to find meeting times.', terms: 'free busy calendar' },
  // OpenAI ("creates an image given a prompt").
  { id: 'image-generation', text: 'Image generation: create an original image or picture from a text prompt describing it.', terms: 'image prompt' },
  // Adyen Payout ("store payout details, confirm, or decline a payout"), Velo Payments, Stripe transfers.
  { id: 'payouts', text: 'Payouts: store payout details and pay out funds to sellers, vendors and payees.', terms: 'payout' },
  // IBANAPI ("validate IBAN numbers ... bank information").
  {
    id: 'iban-validation',
    text: 'IBAN validation: check that an international bank account number is valid and find which bank it belongs to.',
    terms: 'iban',
  },
  // DocuSign eSignature ("envelopes ... recipients sign documents").
  {
    id: 'e-signature',
    text: 'Electronic signature: send documents and contracts to recipients to sign electronically.',
    terms: 'signature envelope',
  },
  // Ticketmaster Discovery ("search for events, attractions, or venues"), setlist.fm ("setlist data of concerts").
  {
    id: 'live-events',
    text: 'Live events: search concerts, tours, shows and attractions with their venues and dates, and buy tickets.',
    terms: 'events venues',
  },
  // SportsData.io Soccer Scores, Football Prediction API.
  {
    id: 'soccer-scores',
    text: 'Football (soccer) scores: match results, fixtures, goals and league standings of soccer competitions.',
    terms: 'soccer',
  },
  // Google Safe Browsing ("check web resources (most commonly URLs) against ... unsafe web resources").
  {
    id: 'url-safety',
    text: 'URL safety: check whether a web link is unsafe, a phishing page, malware or social engineering.',
    terms: 'unsafe web resources',
  },
  // Twilio Verify, Vonage Verify ("two-factor authentication").
  {
    id: 'one-time-codes',
    text: 'Verification codes: send a one-time passcode by SMS or voice to verify a phone number and implement two-factor authentication.',
    terms: 'verify',
  },
  // Taggun ("receipt OCR scanning").
  { id: 'receipt-ocr', text: 'Receipt scanning: extract the merchant, date and total amount from a photo of a receipt.', terms: 'receipt' },
  // LanguageTool ("check texts for style and grammar issues"), Bing Spell Check.
  { id: 'grammar-check', text: 'Grammar and spelling check: find and correct grammar, style and spelling mistakes in a text.', terms: 'grammar' },
  // Musixmatch ("search and retrieve lyrics").
  { id: 'lyrics', text: 'Song lyrics: search songs and retrieve the lyrics of a track.', terms: 'lyrics' },
  // nFusion Solutions ("precious metals ... spot prices").
  { id: 'precious-metals', text: 'Precious metal prices: spot prices of gold, silver and platinum.', terms: 'metals' },
  // NOWPayments ("accept payments in cryptocurrency").
  {
    id: 'crypto-payments',
    text: 'Cryptocurrency payments: accept payments in bitcoin and other cryptocurrencies at checkout.',
    terms: 'cryptocurrency payments',
  },
  // Amadeus On-Demand Flight Status, Flight Delay Prediction.
  { id: 'flight-status', text: 'Flight status: departure and arrival times, delays and cancellations of a flight.', terms: 'flight status' },
  // Truora, Frankie Financial, Adyen Legal Entity Management ("know your customer").
  {
    id: 'identity-verification',
    text: 'Identity verification (KYC): check that a person or customer is who they claim to be, background checks and compliance.',
    terms: 'identity verification',
  },
  // Azure Face ("face detection, verification, and identification").
  { id: 'face-detection', text: 'Face detection: find human faces in an image and recognize or compare them.', terms: 'face detection' },
  // Interzoid Zip Code, Metadapi ("United States zip code data").
  { id: 'zip-codes', text: 'Postal codes: the city, state and area of a zip code or postcode.', terms: 'zip code' },
  // Twilio Fax ("send and receive faxes").
  { id: 'fax', text: 'Fax: send and receive faxes of documents.', terms: 'fax' },
  // Zoom ("meetings, webinars").
  {
    id: 'video-meetings',
    text: 'Video meetings: create and schedule online video meetings and webinars with participants.',
    terms: 'meetings webinar',
  },
  // TomTom Routing ("calculate a route ... travel time with traffic"), GraphHopper ("route planning").
  {
    id: 'routing',
    text: 'Routing: calculate a driving route between places with its travel time and distance, taking traffic into account.',
    terms: 'route travel time',
  },
  // Google Analytics Reporting / Data ("reports on ... users, sessions, page views").
  { id: 'web-analytics', text: 'Website analytics: reports of visitors, users, sessions and page views of a website.', terms: 'analytics' },
  // Mailchimp ("audiences, campaigns"), SendGrid ("marketing campaigns").
  { id: 'email-marketing', text: 'Email marketing: send newsletters and email campaigns to a list of subscribers.', terms: 'campaigns subscribers' },
  // Twilio Voice ("make and receive phone calls"), Vonage Voice.
  {
    id: 'voice-calls',
    text: 'Phone calls: place outbound voice calls to phone numbers and play a message to whoever answers.',
    terms: 'voice calls',
  },
  // Spoonacular ("recipes ... ingredients"), BigOven ("recipe").
  { id: 'recipes', text: 'Recipes: find recipes by the ingredients you have, with instructions and nutrition.', terms: 'recipes' },
  // Visual Crossing, Weatherbit, Meteosource, Stormglass ("weather forecast").
  {
    id: 'weather-forecast',
    text: 'Weather forecast: rain, snow, temperature and wind forecasts for the coming days at a location.',
    terms: 'weather forecast',
  },
  // Spotify ("recommendations ... tracks"), SearchLy ("similarity searching based on song lyrics").
  { id: 'music-recommendations', text: 'Music recommendations: find songs and artists similar to a track.', terms: 'tracks recommendations' },
  // Brex ("company data ... from business registers").
  {
    id: 'company-registry',
    text: 'Company registers: official registration data of businesses from company registries.',
    terms: 'business registers',
  },
  // SIGNL4 ("mobile alerting"), VictorOps, AWS Incident Manager contacts ("on-call").
  { id: 'on-call-alerting', text: 'On-call alerting: mobile alerting of the team on duty about incidents of systems.', terms: 'alerting' },
  // api.video, Mux ("video hosting and streaming").
  { id: 'video-hosting', text: 'Video hosting and streaming: upload videos and play them back with adaptive streaming.', terms: 'video streaming' },
  // Amazon S3, Google Cloud Storage, Azure Blob Storage, Box ("store files").
  { id: 'file-storage', text: 'File storage: upload, store and serve files and images in cloud object storage buckets.', terms: 'storage objects' },
  // Google Translation detectLanguage, Azure Text Analytics ("detected language"), Language Identification API.
  { id: 'language-detection', text: 'Language detection: identify which language a text is written in.', terms: 'detect language' },
  // QuickChart ("chart images").
  { id: 'charts', text: 'Charts: render data as a chart image (bar, line, pie).', terms: 'chart' },
  // remove.bg ("remove the background of any image").
  { id: 'background-removal', text: 'Background removal: remove the background of any image.', terms: 'background remove' },
  // Instagram Graph ("media ... publish").
  { id: 'instagram', text: 'Instagram: publish photos and read media and comments of an Instagram account.', terms: 'instagram' },
  // Twitter API ("tweets ... search").
  { id: 'twitter', text: 'Twitter: search tweets and post to a Twitter account.', terms: 'tweets' },
  // WhatsApp Business, Vonage Messages.
  { id: 'whatsapp', text: 'WhatsApp messaging: send WhatsApp messages to customers.', terms: 'whatsapp' },
  // Xero Accounting ("invoices, bank transactions, reports").
  {
    id: 'accounting',
    text: 'Accounting: invoices, expenses, bank transactions and financial reports such as profit and loss from the bookkeeping ledger.',
    terms: 'accounting',
  },
  // CalorieNinjas ("nutrition data from any text").
  { id: 'nutrition', text: 'Nutrition facts: calories, protein and fat of foods and meals.', terms: 'nutrition' },
  // OMDb ("movie information"), Trakt.
  { id: 'movies', text: 'Movies: information, ratings and reviews of films and TV shows.', terms: 'movie' },
  // Google Cloud Vision, Amazon Rekognition ("detect objects ... in images").
  { id: 'image-recognition', text: 'Image recognition: detect objects, labels and scenes in photos.', terms: 'image labels' },
  // SMS providers ("send SMS messages").
  { id: 'sms', text: 'SMS: send text messages to mobile phones.', terms: 'sms' },
  // Currency APIs ("exchange rates").
  { id: 'exchange-rates', text: 'Exchange rates: convert amounts between currencies at current foreign exchange rates.', terms: 'exchange rates' },
  // Geocoders ("convert addresses into geographic coordinates").
  { id: 'geocoding', text: 'Geocoding: turn an address into latitude and longitude coordinates and back.', terms: 'geocoding' },
];
