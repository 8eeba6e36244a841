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

import { nearestOf } from './semantic.js';

export interface Capability {
  id: string;
  text: string;
  terms: string;
  /**
   * Other sets of the catalog's words for it, where its providers word it differently (TomTom "calculates a
   * route", GraphHopper "route planning"): an API holding every word of one set in its own text (name, categories,
   * description) or in one operation is a member too (up to CAPABILITY_MEMBERS by its text, and as many again by an
   * operation, per set).
   */
  also?: readonly string[];
  /**
   * Members hold the terms in their own text (name, categories, description) or in one operation, not anywhere
   * over all their operations: for a word many APIs use in passing ("invoice": a card printer's, a marketplace's).
   * Set on every kind where that leaves out only APIs of other kinds (read from the members each way, docs/DISCOVERY.md,
   * "a fifteenth session": Stripe and Twilio in domain availability, SendGrid and Zoom in contacts); not where it
   * also leaves out providers of the kind (SendGrid in email sending, Zoom in video meetings, Amazon S3 in file storage).
   */
  ownText?: boolean;
  /**
   * Counted only when a task's wording states it (vocabulary.ts, `taskNeeds().stated`), never as the kind closest in
   * meaning: its description is close to every task that mentions its object ("an email address" is not
   * asking to send one).
   */
  statedOnly?: boolean;
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
    // Held in an API's own text or one operation: spread over operations, they made a member of Meraki's network devices.
    ownText: true,
  },
  // Sonar ("exchange rate of ... crypto currencies"), NOWPayments ("get estimated price"), Chain49 ("tickers" of
  // each blockchain).
  {
    id: 'crypto-prices',
    text: 'Cryptocurrency prices: the current market price and exchange rate of bitcoin, ether and other crypto currencies and tokens.',
    terms: 'crypto currencies',
    also: ['blockchain tickers'],
  },
  // IDT Boss Revolution ("topup a mobile phone", international airtime top-ups).
  {
    id: 'mobile-top-up',
    text: 'Mobile top-up: send prepaid airtime credit to a mobile phone number, also to phones in other countries.',
    terms: 'topup mobile phone',
    // Held in an API's own text or one operation: the words spread over a VoIP provider's operations made it a member.
    ownText: true,
  },
  // TVmaze (schedules of TV networks), BBC Nitro ("BBC Programmes Metadata"), Channel 4 ("programmes data").
  {
    id: 'tv-listings',
    text: 'TV listings: the television schedule, which programmes and episodes are on each channel tonight and when they air.',
    terms: 'tv schedule',
    also: ['programmes metadata', 'channel programmes'],
  },
  // NPR Station Finder ("look up NPR member station information"), Zeno.FM (radio stations and their streams).
  {
    id: 'radio-stations',
    text: 'Radio stations: find the radio stations to listen to near a place or by genre, with their live streams and programmes.',
    terms: 'radio station',
    // Close in meaning to a band's name that holds "radio" (the model reads "Radiohead" as radio and head).
    statedOnly: true,
  },
  // William Hill Bets ("place single, multiple and complex bets ... bet history"), William Hill SportsData ("market and
  // selection data (including prices)").
  {
    id: 'betting',
    text: 'Sports betting: the odds bookmakers offer on sports events and markets, and placing bets from a betting account.',
    terms: 'bets',
    also: ['william hill'],
  },
  // The Unified Taxonomic Information Service ("the taxonomic backbone").
  {
    id: 'species-names',
    text: 'Species names: the accepted scientific Latin names of plants and animals, their synonyms and common names, from taxonomic databases.',
    terms: 'taxonomic',
  },
  // Klarna ("Klarna's payment methods as part of your checkout": pay later, in instalments).
  {
    id: 'pay-later',
    text: 'Pay later: let shoppers pay for a purchase later or split it into interest-free instalments at checkout.',
    terms: 'klarna',
    // Close in meaning to every task about a checkout ("a cart icon for the checkout button").
    statedOnly: true,
  },
  // Amazon Mechanical Turk (HITs done by workers), Google Cloud AI Data Labeling.
  {
    id: 'crowd-work',
    text: 'Crowd work: pay people online to do small tasks such as tagging images, labelling data or answering surveys.',
    terms: 'mechanical turk',
    also: ['cloud ai data labeling'],
  },
  // Google People ("profiles and contacts").
  {
    id: 'contacts',
    text: "Contacts: the people in a user's address book with their phone numbers and email addresses, and contact groups.",
    terms: 'contacts profiles',
    ownText: true,
  },
  // Azure Ink Recognizer ("ink layout and recognition of written words and shapes").
  {
    id: 'handwriting-recognition',
    text: 'Handwriting recognition: recognize the written words and drawn shapes in digital ink strokes from a pen or stylus.',
    terms: 'ink recognition',
  },
  // Google Search Console ("Search Console data ... for your verified sites").
  {
    id: 'search-performance',
    text: 'Search performance: the search queries people type before they reach a website, and how its pages rank in search results.',
    terms: 'search console',
    ownText: true,
  },
  // Faretrotter ("modes of transportation between cities and points of interest").
  {
    id: 'travel-options',
    text: 'Travel options: the ways to travel between two cities, by train, bus, plane or car, with their times and prices.',
    terms: 'modes transportation',
    ownText: true,
  },
  // DigitalOcean's uptime checks, CloudWatch Synthetics ("creates a canary": scripts that monitor endpoints on a schedule).
  {
    id: 'uptime-monitoring',
    text: 'Uptime monitoring: check a website or endpoint on a schedule and alert when it goes down or stops responding.',
    terms: 'uptime checks',
    also: ['synthetics canary'],
  },
  // ShipEngine ("validate an address"), Telnyx ("validate an address").
  {
    id: 'address-validation',
    text: 'Address validation: check and standardize a postal or shipping address so that a parcel can be delivered to it.',
    terms: 'validate address shipping',
    ownText: true,
  },
  // Apptigent PowerTools ("Files - Resize Image").
  {
    id: 'image-resizing',
    text: 'Image resizing: resize, compress and convert images to other sizes and formats.',
    terms: 'resize image',
    ownText: true,
  },
  // GoDaddy ("determine whether or not the specified domain is available for purchase"), Route 53 Domains ("checks the availability of one domain name"), apispot ("check domain availability").
  {
    id: 'domain-availability',
    text: 'Domain availability: check whether a domain name is available for purchase and registration.',
    terms: 'domain availability',
    ownText: true,
  },
  // Google Calendar ("returns free/busy information for a set of calendars"), Microsoft Graph getSchedule.
  { id: 'free-busy', text: 'Calendar free/busy: free/busy information for a set of calendars, to find meeting times.', terms: 'free busy calendar' },
  // OpenAI ("creates an image given a prompt").
  {
    id: 'image-generation',
    text: 'Image generation: create an original image or picture from a text prompt describing it.',
    terms: 'image prompt',
    ownText: true,
  },
  // Adyen Payout ("store payout details, confirm, or decline a payout"), Velo Payments, Stripe transfers.
  { id: 'payouts', text: 'Payouts: store payout details and pay out funds to sellers, vendors and payees.', terms: 'payout' },
  // vatapi.com ("validate a VAT number"), Brex ("a list of VAT numbers with additional data"), Randommer ("validate
  // VAT/identity numbers"), Taxamo ("EU VIES report").
  {
    id: 'vat-validation',
    text: 'VAT number validation: check that the VAT registration number of a European business is valid and which company it belongs to.',
    terms: 'vat number',
    also: ['validate vat'],
  },
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
  // setlist.fm ("setlist data", "search for setlists" by artist, venue, city).
  {
    id: 'setlists',
    text: 'Concert setlists: the songs an artist played at a concert, searched by artist, venue, city and date.',
    terms: 'setlists',
    // Close in meaning to every task about songs (a playlist to make); stated by "what did ... play at" (vocabulary.ts).
    statedOnly: true,
  },
  // Trash Nothing (its posts of offers and wanted items, in local groups).
  {
    id: 'giveaways',
    text: 'Giving things away: post unwanted items free to people nearby, and find free items others offer, in local reuse groups.',
    terms: 'trash nothing',
  },
  // CORE ("articles, journals and repositories", "get fulltext PDF"), OSF (preprints).
  {
    id: 'research-papers',
    text: 'Research papers: search scholarly articles and open access research papers, and download their full text.',
    terms: 'research articles',
    also: ['fulltext articles', 'preprints'],
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
  {
    id: 'flight-status',
    text: 'Flight status: departure and arrival times, delays and cancellations of a flight.',
    terms: 'flight status',
    ownText: true,
  },
  // Truora, Frankie Financial, Adyen Legal Entity Management ("know your customer").
  {
    id: 'identity-verification',
    text: 'Identity verification (KYC): check that a person or customer is who they claim to be, background checks and compliance.',
    terms: 'identity verification',
    ownText: true,
  },
  // Azure Face ("face detection, verification, and identification").
  { id: 'face-detection', text: 'Face detection: find human faces in an image and recognize or compare them.', terms: 'face detection' },
  // Interzoid Zip Code, Metadapi ("United States zip code data").
  { id: 'zip-codes', text: 'Postal codes: the city, state and area of a zip code or postcode.', terms: 'zip code', ownText: true },
  // Twilio Fax ("send and receive faxes").
  { id: 'fax', text: 'Fax: send and receive faxes of documents.', terms: 'fax' },
  // Zoom ("meetings, webinars").
  {
    id: 'video-meetings',
    text: 'Video meetings: create and schedule online video meetings and webinars with participants.',
    terms: 'meetings webinar',
  },
  // GraphHopper ("route optimization"), GSMtasks ("real-time delivery and task management and route optimization").
  {
    id: 'route-optimization',
    text: 'Route optimization: solve vehicle routing problems, assigning many delivery stops to several vehicles and ordering the stops of each.',
    terms: 'route optimization',
  },
  // Google Calendar ("manipulates events and other calendar data"), Microsoft Graph (calendar events).
  {
    id: 'calendar-events',
    text: "Calendar events: create, update and list events on a person's or a shared calendar, with reminders and attendees.",
    terms: 'calendar events',
    ownText: true,
  },
  // Stripe ("create a payment link", PaymentIntents), Adyen Checkout ("initiate and authorise online payments ... cards"), PAYONE Link.
  {
    id: 'card-payments',
    text: "Card payments: accept card payments online with payment links and checkout pages that charge a customer's card.",
    terms: 'payment link',
  },
  // Mandrill ("delivery API for transactional emails"), Postmark ("sending and receiving email"), SendGrid ("mail send").
  {
    id: 'email-sending',
    text: 'Email sending: send transactional email, such as confirmations, receipts and notifications, to a person.',
    terms: 'transactional email',
    statedOnly: true,
  },
  // TomTom Routing ("calculate a route ... travel time with traffic"), GraphHopper ("route planning"), Amazon Location
  // ("calculates a route given ... DeparturePosition and DestinationPosition").
  {
    id: 'routing',
    text: 'Routing: calculate a driving route between places with its travel time and distance, taking traffic into account.',
    terms: 'route travel time',
    ownText: true,
    also: ['calculates route destination', 'route planning navigation'],
  },
  // Google Analytics Reporting / Data ("reports on ... users, sessions, page views").
  { id: 'web-analytics', text: 'Website analytics: reports of visitors, users, sessions and page views of a website.', terms: 'analytics' },
  // Mailchimp ("audiences, campaigns"), SendGrid ("marketing campaigns").
  {
    id: 'email-marketing',
    text: 'Email marketing: send newsletters and email campaigns to a list of subscribers.',
    terms: 'campaigns subscribers',
    ownText: true,
  },
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
    // Held in an API's own text or one operation: spread over operations, they made members of marine and climate-model
    // APIs (Stormglass, Ocean Drivers, GeodeSystems) that rank over general forecasts for a picnic's rain.
    ownText: true,
    also: ['weather data point'],
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
  {
    id: 'on-call-alerting',
    text: 'On-call alerting: mobile alerting of the team on duty about incidents of systems.',
    terms: 'alerting',
    ownText: true,
    // VictorOps ("acknowledge an incident"), SIGNL4 ("duty schedule"), AWS Incident Manager ("a rotation in an on-call schedule").
    also: ['acknowledge incident', 'duty schedule', 'call schedule rotation'],
  },
  // api.video, Mux ("video hosting and streaming").
  { id: 'video-hosting', text: 'Video hosting and streaming: upload videos and play them back with adaptive streaming.', terms: 'video streaming' },
  // Amazon S3, Google Cloud Storage, Azure Blob Storage, Box ("store files").
  { id: 'file-storage', text: 'File storage: upload, store and serve files and images in cloud object storage buckets.', terms: 'storage objects' },
  // Box ("add shared link to file"), DRACOON ("send an existing download share link via email"), Apideck File
  // Storage ("create shared link").
  {
    id: 'file-sharing',
    text: 'File sharing: share files and folders in a cloud drive with other people through a shared link they open or download from.',
    terms: 'shared link',
    also: ['file sharing'],
  },
  // Google Translation detectLanguage, Azure Text Analytics ("detected language"), Language Identification API.
  { id: 'language-detection', text: 'Language detection: identify which language a text is written in.', terms: 'detect language', ownText: true },
  // QuickChart ("chart images").
  { id: 'charts', text: 'Charts: render data as a chart image (bar, line, pie).', terms: 'chart' },
  // remove.bg ("remove the background of any image").
  { id: 'background-removal', text: 'Background removal: remove the background of any image.', terms: 'background remove', ownText: true },
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
    ownText: true,
  },
  // Envoice ("create an invoice"), Billingo ("send invoice to given email addresses"), Stripe ("send invoices to
  // customers"), Apideck and Codat Accounting ("create invoice").
  {
    id: 'invoicing',
    text: 'Invoicing: create an invoice for a customer with its line items and amount due, send it to them by email and see whether it is paid.',
    terms: 'create invoice',
    also: ['invoicing software'],
    ownText: true,
  },
  // CalorieNinjas ("nutrition data from any text").
  { id: 'nutrition', text: 'Nutrition facts: calories, protein and fat of foods and meals.', terms: 'nutrition' },
  // Google Cloud Natural Language ("sentiment analysis"), Semantria ("Text and Sentiment Analysis to tweets, ... reviews"), text2data, Datumbox.
  {
    id: 'sentiment-analysis',
    text: 'Sentiment analysis: tell whether the opinion in a text such as a review or a post is positive, negative or neutral.',
    terms: 'sentiment',
  },
  // ISBNdb, Google Books ("access the Google Books repository"), NYT Books ("book reviews and ... bestsellers lists").
  { id: 'books', text: 'Books: look up a book, its title, authors and edition, by its ISBN, and search books.', terms: 'isbn' },
  // OMDb ("movie information"), Trakt.
  { id: 'movies', text: 'Movies: information, ratings and reviews of films and TV shows.', terms: 'movie' },
  // Google Cloud Vision, Amazon Rekognition ("detect objects ... in images").
  { id: 'image-recognition', text: 'Image recognition: detect objects, labels and scenes in photos.', terms: 'image labels', ownText: true },
  // SMS providers ("send SMS messages").
  { id: 'sms', text: 'SMS: send text messages to mobile phones.', terms: 'sms' },
  // Currency APIs ("exchange rates").
  {
    id: 'exchange-rates',
    text: 'Exchange rates: convert amounts between currencies at current foreign exchange rates.',
    terms: 'exchange rates',
    ownText: true,
  },
  // Bing Local Search ("local businesses such as restaurants, hotels, retail stores ... restaurants near me"), Google Places
  // ("search for places near locations", "text query based place search"), TomTom Search ("points of interest search", "nearby search").
  {
    id: 'places-search',
    text: 'Local places search: find local businesses such as restaurants, cafes and retail stores, and points of interest near a location.',
    terms: 'points interest',
    ownText: true,
  },
  // Geocoders ("convert addresses into geographic coordinates").
  { id: 'geocoding', text: 'Geocoding: turn an address into latitude and longitude coordinates and back.', terms: 'geocoding' },
  // Broader layer (2026-11-28): more kinds of service the catalog holds, each from its providers' documents.
  // Google Cloud Translation ("integrates text translation"), Amazon Translate, LibreTranslate ("translate text from a language to another").
  { id: 'translation', text: 'Translation: translate text from one language to another.', terms: 'translate text', ownText: true },
  // Wordnik ("definitions for a word", "related words"), Oxford Dictionaries ("dictionary information", "words that mean the opposite"), Word Associations.
  { id: 'dictionary', text: 'Dictionary and thesaurus: definitions, synonyms, antonyms and related words for a word.', terms: 'dictionary' },
  // Giphy ("Search GIFs; Random GIF; Translate phrase to GIF").
  { id: 'gifs', text: 'GIFs: search animated GIFs, get a random GIF or translate a phrase to a GIF.', terms: 'gifs' },
  // OpenUV ("real-time UV Index", "hourly UV Index forecast", "daily protection time").
  {
    id: 'uv-index',
    text: 'UV index: the real-time and forecast ultraviolet (UV) index at a location, and the daily sun protection time.',
    terms: 'uv index',
  },
  // Freesound ("search ... the sounds themselves", "find similar sounds").
  { id: 'sound-library', text: 'Sound library: search and download recorded sounds and sound samples.', terms: 'sounds' },
  // Shutterstock ("library of media", images, videos, music), Getty Images ("search for images ... videos").
  {
    id: 'stock-media',
    text: 'Stock photos and footage: search and license images, videos and music from a stock media library.',
    terms: 'images licenses',
  },
  // Icons8 ("search and obtain our icons"), The Noun Project ("Icons for Everything", "collection icons").
  { id: 'icons', text: 'Icons: search icon collections for a symbol to use in an app or website.', terms: 'icons' },
  // NBA Stats ("current and historic NBA statistics"), SportsData.io NBA Scores, balldontlie ("games", "players", "stats").
  { id: 'basketball', text: 'Basketball (NBA): game scores, box scores, players, teams and statistics.', terms: 'nba' },
  // The Racing API ("horse racing results and daily racecards").
  { id: 'horse-racing', text: 'Horse racing: daily racecards, runners and results of horse races.', terms: 'horse racing' },
  // Lyft ("cost estimates", "available drivers nearby", "pickup ETAs", "rides"), ecotaco ("order rides").
  { id: 'ride-hailing', text: 'Ride hailing: request a ride from a nearby driver, with cost estimates and pickup times.', terms: 'rides' },
  // departureboard.io ("services arriving to and departing from a UK train station"), Deutsche Bahn Fahrplan, TfL.
  { id: 'train-times', text: 'Train times: live departures and arrivals of trains at railway stations, and timetables.', terms: 'departures' },
  // Taxrates.io ("global tax rate service"), VAT API ("VAT rates by country"), Taxamo.
  {
    id: 'tax-rates',
    text: 'Tax rates: VAT and sales tax rates by country and region, and the tax due on a sale.',
    terms: 'tax rates',
    ownText: true,
  },
  // ShipEngine ("manage all of your shipping needs ... carrier"; rates, labels, tracking), eBay Logistics ("shipping quotes").
  {
    id: 'shipping',
    text: 'Shipping: compare carrier shipping rates for a package, buy shipping labels and track shipments.',
    terms: 'shipping carrier',
    // Held in an API's own text or one operation: spread over operations, they made members of store platforms' APIs (VTEX
    // logistics, Google's Content API for Shopping).
    ownText: true,
  },
  // NamSor ("process personal names (gender, cultural origin or ethnicity)").
  { id: 'name-analysis', text: 'Name analysis: the likely gender and cultural origin of a personal name.', terms: 'gender names', ownText: true },
  // PageSpeed Insights ("analyze the performance of your website", "suggestions to make that page faster").
  { id: 'page-speed', text: 'Page speed: analyze the performance of a web page and get suggestions to make it load faster.', terms: 'pagespeed' },
  // Probely ("web vulnerability scanning"), Web Security Scanner ("scans ... apps for common web vulnerabilities").
  {
    id: 'vulnerability-scanning',
    text: 'Vulnerability scanning: scan web applications for security vulnerabilities.',
    terms: 'vulnerabilities scan',
  },
  // OnSched ("online booking ... availability and booking", "create appointment").
  {
    id: 'appointment-booking',
    text: 'Appointment booking: online booking of appointments in available time slots with services and staff.',
    terms: 'appointments',
  },
  // Google Civic Information ("polling places ... government representatives for U.S. residential addresses"), Open States.
  {
    id: 'civic-information',
    text: 'Civic information: elected government representatives, elections and polling places for an address.',
    terms: 'representatives government',
    ownText: true,
  },
  // YNAB ("budgets", "accounts", "transactions"), PocketSmith ("transactions in account").
  {
    id: 'personal-budgeting',
    text: 'Personal budgeting: budgets, accounts and categorized transactions of personal spending.',
    terms: 'budgets transactions',
  },
  // Carbone ("generate a document from a template ID, and a JSON data-set"), PDF Generator API, DocSpring ("fill out ... PDF templates").
  {
    id: 'document-generation',
    text: 'Document generation: fill a document template with data and render it as a PDF.',
    terms: 'template pdf',
    ownText: true,
  },
  // Moon API ("moon phase data", "lunar calendar"), Wyjyt Geo Calculate ("sun, moon, eclipse and sky information").
  { id: 'moon-phase', text: 'Moon phases: the phase of the moon and the lunar calendar for a date and place.', terms: 'moon' },
  // Travel Impact Model ("travel carbon emission estimates"), Climatekuul, CarbonDoomsDay ("carbon dioxide levels").
  { id: 'carbon-emissions', text: 'Carbon emissions: estimates of the carbon dioxide emissions of travel and activities.', terms: 'carbon' },
  // OpenALPR ("analyzed for license plates and vehicle make/models").
  { id: 'license-plates', text: 'License plate recognition: read the license plate and vehicle make in an image.', terms: 'plate' },
  // DVLA Vehicle Enquiry ("get vehicle details by registration number"), Car Registration API ("car information from its
  // numberplate"), MarketCheck ("recall info by VIN").
  {
    id: 'vehicle-records',
    text: 'Vehicle records: the details of a car from its registration number or VIN: make, model, year, tax and MOT status, recalls.',
    terms: 'vehicle details',
    ownText: true,
    // MarketCheck's and Auto Dealer Data's "VIN Decoder" operations.
    also: ['vin decoder'],
  },
  // Chomp ("branded food item using a barcode"), Go-UPC ("product info for a particular barcode number"), EAN-Search ("look up an EAN").
  { id: 'barcode-lookup', text: 'Barcode lookup: the product and its details for a UPC or EAN barcode number.', terms: 'barcode' },
  // Buffer ("social media management", "posting schedules").
  { id: 'social-scheduling', text: 'Social media scheduling: schedule and publish posts to social media profiles.', terms: 'social media' },
  // OrgHunter ("charity information", IRS data), eBay Charity ("supported charitable organizations").
  { id: 'charities', text: 'Charities: search charitable organizations and their registration details.', terms: 'charity' },
  // Color Name API ("names for colors based on their hex value").
  { id: 'color-names', text: 'Color names: the name of a color from its hex value.', terms: 'colors hex' },
  // Ideal Postcodes ("find address", "resolve address"), PlaceKit ("search for addresses").
  {
    id: 'address-lookup',
    text: 'Address lookup: find and autocomplete full postal addresses from a postcode or partial address.',
    terms: 'postcodes',
  },
  // Spinbot ("article rewriter", "rewriting (spinning) your input article").
  { id: 'text-rewriting', text: 'Text rewriting: rewrite an article in other words, keeping its meaning.', terms: 'rewrite' },
  // Fungenerators Fake Identity ("generate random fake identities (name, address, email, phone)"), PhantAuth ("random user generator"), Randommer.
  { id: 'fake-data', text: 'Fake test data: generate random names, addresses, emails and identities.', terms: 'fake' },
  // BikeWise ("bicycling related incidents").
  { id: 'bike-incidents', text: 'Bicycle incidents: reports of bike thefts, crashes and hazards near a location.', terms: 'bike' },
  // Twilio Lookups ("fetch phone number"), Interzoid Global Number Info ("geographic information for a global telephone number").
  { id: 'phone-lookup', text: 'Phone number lookup: the carrier, line type, caller name and location of a phone number.', terms: 'phone lookup' },
  // City Context ("UK Open Data: crime statistics, schools, demographics").
  { id: 'crime-statistics', text: 'Crime statistics: reported crimes and demographics of a neighbourhood.', terms: 'crime' },
  // SchoolDigger ("data on over 120,000 schools and 18,500 districts").
  { id: 'schools', text: 'Schools: school and district data, rankings and test scores.', terms: 'schools' },
  // RentCast ("rent estimate", "value estimate", "rental listings", "sale listings"), SimplyRETS.
  {
    id: 'real-estate',
    text: 'Real estate: property listings for sale and rent, and rent and value estimates of a property.',
    terms: 'rental listings',
  },
  // Listen Notes ("podcast search & directory"), Spotify ("discover music and podcasts").
  { id: 'podcasts', text: 'Podcasts: search podcasts and episodes by topic.', terms: 'podcasts' },
  // Shotstack ("automated generation of videos, images and audio"), JSON2Video ("create and edit videos programmatically").
  { id: 'video-editing', text: 'Video editing: create and render videos from images, clips, text and audio.', terms: 'render videos', ownText: true },
  // FraudLabs Pro ("screen order for payment fraud"), Amazon Fraud Detector.
  { id: 'fraud-detection', text: 'Fraud detection: screen online orders and payments for fraud.', terms: 'fraud' },
  // IP2Proxy ("detection of anonymous proxy, VPN, TOR exit nodes").
  {
    id: 'proxy-detection',
    text: 'Proxy and VPN detection: whether an IP address is an anonymous proxy, VPN or TOR exit node.',
    terms: 'proxy ip',
    ownText: true,
  },
  // Shorten.rest ("create short URLs"), TinyUID.
  { id: 'url-shortening', text: 'URL shortening: create a short link (alias) that redirects to a long URL.', terms: 'shorten' },
  // LinQR ("generate custom ... QR Codes"), QuickChart.
  { id: 'qr-codes', text: 'QR codes: generate a QR code image for a link or text.', terms: 'qr' },
  // Urlbox ("capture screenshots of a web page"), Browshot.
  { id: 'screenshots', text: 'Screenshots: capture a screenshot image of a web page from its URL.', terms: 'screenshot' },
  // Api2Pdf ("convert raw HTML to PDF", "URL to PDF", "office document ... to PDF").
  { id: 'pdf-conversion', text: 'PDF conversion: convert HTML, web pages and office documents to PDF.', terms: 'pdf convert', ownText: true },
  // PDF Blocks ("merge PDF documents, add or remove passwords, add watermarks, remove, extract, reverse, and
  // rotate pages"), PdfBroker.io ("other useful pdf utilities").
  {
    id: 'pdf-editing',
    text: 'PDF editing: merge several PDF documents into one, and remove, extract, reorder or rotate their pages.',
    terms: 'merge pdf',
    ownText: true,
  },
  // MailboxValidator ("validation on a single email address"), IPQualityScore ("Email Validation").
  {
    id: 'email-validation',
    text: 'Email validation: check whether an email address is valid, deliverable or disposable.',
    terms: 'email validation',
    ownText: true,
  },
  // IP2WHOIS ("WHOIS information for a particular domain ... owner contact ... registrar").
  { id: 'whois', text: 'WHOIS: the owner, registrar and registration dates of a domain name.', terms: 'whois' },
  // IP2Location ("reverse lookup of an IP address to ... country, region, city").
  { id: 'ip-geolocation', text: 'IP geolocation: the country, city and location of an IP address.', terms: 'ip geolocation' },
  // World Time API ("current time based on ... a timezone").
  { id: 'time-zones', text: 'Time zones: the current local time in a time zone.', terms: 'timezone time', ownText: true },
  // Canada Holidays ("public holidays for all 13 provinces and territories").
  { id: 'public-holidays', text: 'Public holidays: the public holidays of a country or province.', terms: 'holidays' },
  // New York Times Top Stories, Times Wire.
  { id: 'news', text: 'News: the latest news articles and top stories.', terms: 'news articles' },
  // Jokes One ("Joke of the Day", "jokes platform").
  { id: 'jokes', text: 'Jokes: a joke of the day, or jokes by category.', terms: 'jokes' },
  // They Said So Quotes ("Quote of the Day", "quotes platform").
  { id: 'quotes', text: 'Quotes: a famous quote of the day, or quotes by author and category.', terms: 'quotes day', ownText: true },
  // Google Cloud Talent Solution, DataAtWork ("jobs").
  { id: 'job-search', text: 'Job search: search job postings and openings.', terms: 'job postings', ownText: true },
  // Infermedica ("intelligent diagnostic insights", "query diagnostic engine").
  { id: 'symptom-checker', text: 'Symptom checking: possible conditions for a set of symptoms, from a diagnostic engine.', terms: 'symptoms' },
  // Cloudmersive OCR, Amazon Textract ("extract text ... from scanned documents").
  { id: 'ocr', text: 'OCR: extract the text from scanned documents and images.', terms: 'ocr' },
  // Google's reCAPTCHA Enterprise ("protect your website from fraudulent activity, spam, and abuse"), Firebase App Check
  // (reCAPTCHA attestation), Identity Toolkit (reCAPTCHA parameters of a sign-up).
  {
    id: 'bot-protection',
    text: 'Bot protection: tell people from bots on sign-up and login forms with a CAPTCHA challenge or a risk score.',
    terms: 'recaptcha',
    also: ['captcha'],
  },
  // ModerateContent ("blocks images with nudity"), Azure Content Moderator.
  { id: 'content-moderation', text: 'Content moderation: detect nudity and offensive content in images and text.', terms: 'moderation' },
  // WebScraping.AI ("web scraping automation API", "page HTML by URL"), Dataflow Kit.
  { id: 'web-scraping', text: 'Web scraping: fetch a web page and extract its HTML, text and data.', terms: 'scraping' },
  // Bing Web Search ("send a search query to Bing and get back search results that include links to webpages"),
  // goog.io ("perform Google searches"), Google Custom Search ("searches over a website or collection of websites").
  {
    id: 'web-search',
    text: 'Web search: send a search query to a search engine and get back results with links to web pages, their titles and snippets.',
    terms: 'web search',
    ownText: true,
    also: ['perform google searches'],
  },
  // Traccar ("GPS tracking platform").
  { id: 'gps-tracking', text: 'GPS tracking: the live positions and routes of tracked devices and vehicles.', terms: 'gps tracking', ownText: true },
  // Polygon.io ("historic quotes", "aggregates"), 1Forge, Tradematic.
  { id: 'stock-quotes', text: 'Stock market data: real-time and historical quotes and prices of stocks.', terms: 'stocks quotes', ownText: true },
  // Plaid ("real-time balance data", "accounts", transactions), Nordigen.
  { id: 'bank-accounts', text: 'Bank account data: balances and transactions of connected bank accounts.', terms: 'bank accounts transactions' },
  // PayRun.io ("payroll API"), Paylocity, Xero Payroll.
  { id: 'payroll', text: 'Payroll: run payroll and pay employees their salaries.', terms: 'payroll' },
  // TransitFeeds ("transit feeds"), WMATA, PTV.
  { id: 'public-transit', text: 'Public transit: timetables and real-time arrivals of buses, trams and trains.', terms: 'transit' },
  // Asana, Trello, ClickUp ("tasks", "projects").
  { id: 'task-management', text: 'Task management: projects, tasks and to-do lists of a team.', terms: 'tasks projects' },
  // HubSpot CRM, Apideck CRM, Salesforce ("contacts", "deals", "companies").
  { id: 'crm', text: 'CRM: customer contacts, companies, leads and sales deals.', terms: 'crm' },
  // Amadeus Hotel Search, Impala ("hotel booking").
  { id: 'hotels', text: 'Hotels: search hotel offers and book rooms.', terms: 'hotel' },
  // Amadeus Flight Offers ("flight offers search").
  { id: 'flights', text: 'Flights: search flight offers and fares between airports.', terms: 'flight offers', ownText: true },
  // UK Parliament Bills, Open States ("bills search").
  { id: 'legislation', text: 'Legislation: bills and laws before a parliament, and how its members voted.', terms: 'bills parliament' },
  // Wolfram|Alpha ("Get Wolfram Alpha results"), Math Tools.
  { id: 'computation', text: 'Computation: answers to math and science questions, computed.', terms: 'math' },
  // Internet Archive Wayback Machine.
  { id: 'web-archive', text: 'Web archive: archived snapshots of web pages as they were in the past.', terms: 'wayback' },
  // TVmaze ("episodes"), TheTVDB, Trakt.
  { id: 'tv-shows', text: 'TV shows: series, seasons, episodes and their air dates.', terms: 'episodes shows', ownText: true },
  // RAWG ("the largest open video games database ... platforms").
  { id: 'video-games', text: 'Video games: games with their platforms, release dates and ratings.', terms: 'games platforms' },
  // Just Eat ("restaurants", "delivery", "checkout").
  { id: 'food-delivery', text: 'Food delivery: order takeaway food from restaurants for delivery.', terms: 'restaurants' },
  // Password Utility ("validate and generate passwords").
  { id: 'passwords', text: 'Passwords: generate strong passwords and validate their strength.', terms: 'passwords validate generate', ownText: true },
  // Amazon SNS, Azure Notification Hubs ("push notifications").
  {
    id: 'push-notifications',
    text: 'Push notifications: send push notifications to mobile apps and devices.',
    terms: 'push notifications',
    ownText: true,
  },
  // Slack ("post a message to a channel"), Telegram.
  { id: 'team-chat', text: 'Team chat: post messages to channels and groups of a chat workspace.', terms: 'channel messages' },
  // GitHub ("repositories", "issues", "pull requests"), GitLab, Bitbucket.
  { id: 'code-hosting', text: 'Code hosting: git repositories, issues and pull requests.', terms: 'repositories pull' },
  // LaunchDarkly ("feature flags"), ConfigCat, CloudWatch Evidently ("serving them to a specified percentage of your users while you roll out the feature").
  {
    id: 'feature-flags',
    text: 'Feature flags: turn a feature on or off without a deploy and roll it out to a percentage of users.',
    terms: 'feature flags',
    ownText: true,
  },
  // bintable ("lookup card information using its BIN"), Adyen BinLookup, Mastercard BIN table, Neutrino ("BIN Lookup").
  {
    id: 'card-bin-lookup',
    text: 'Card BIN lookup: the issuing bank, card brand and type (debit or credit) of a payment card from its first digits.',
    terms: 'bin',
  },
  // Where to Credit ("mileage earning calculations for frequent flyer programs").
  {
    id: 'frequent-flyer',
    text: 'Frequent flyer miles: how many miles and points a flight earns in each airline loyalty program.',
    terms: 'frequent flyer',
  },
  // FEC ("explore the way candidates and committees fund their campaigns").
  {
    id: 'campaign-finance',
    text: 'Campaign finance: how political candidates and committees raise and spend money for their election campaigns.',
    terms: 'candidates committees',
    ownText: true,
  },
  // UniCourt ("court data": cases, dockets, parties and attorneys).
  { id: 'court-records', text: 'Court records: court cases, their dockets, filings, parties and hearing dates.', terms: 'court' },
];

/** What embeds the descriptions (the discovery model: embedder.ts). */
interface SentenceEmbedder {
  readonly model: string;
  embed(texts: string[]): Promise<Float32Array[]>;
}

/** Per model, the descriptions' vectors: the texts are constants, so a process embeds them once. */
const vectorsByModel = new Map<string, Promise<Float32Array[]>>();

/**
 * The embedded descriptions of CAPABILITIES, in order. Embedding all 160 costs about 1.9 s of CPU on a
 * host without VNNI (docs/DISCOVERY.md), so they are remembered per model for the process's later
 * index loads (a catalog change reloads the index; the test suite builds many apps per process).
 * A failed embedding is not remembered.
 */
export function capabilityVectors(embedder: SentenceEmbedder): Promise<Float32Array[]> {
  let vectors = vectorsByModel.get(embedder.model);
  if (!vectors) {
    vectors = embedder.embed(CAPABILITIES.map((c) => c.text));
    vectorsByModel.set(embedder.model, vectors);
    vectors.catch(() => vectorsByModel.delete(embedder.model));
  }
  return vectors;
}

/**
 * How close an API's embedding must be to a capability's description to count as of its kind (capabilityKin).
 * Measured on the tuning sets with 0.45 and 0.5 (docs/DISCOVERY.md, "a tenth session"): the APIs the sets
 * expect among a capability's members are 0.49 from its description on average, the others 0.23.
 */
export const CAPABILITY_KIN_MIN_SIMILARITY = 0.45;

/**
 * Per capability, the APIs whose own embedding is at least `min` from its description (positions and
 * similarities, closest first): the APIs that are of that kind in meaning, whatever words they use.
 * A capability's members are found by its words, which an API of another kind may hold too (AWS
 * Signer's code signing holds "sign"); this says how much an API is what the capability describes.
 * `similarities(vector)` is each API's similarity to a unit vector (DenseVectors.similarities).
 */
export async function capabilityKin(
  vectors: readonly Float32Array[],
  similarities: (vector: Float32Array) => Promise<Float32Array>,
  min: number,
): Promise<{ at: Int32Array; similarity: Float32Array }[]> {
  const kin: { at: Int32Array; similarity: Float32Array }[] = [];
  for (const vector of vectors) {
    const close = nearestOf(await similarities(vector), Number.POSITIVE_INFINITY, min);
    kin.push({ at: Int32Array.from(close, (c) => c.at), similarity: Float32Array.from(close, (c) => c.similarity) });
  }
  return kin;
}
