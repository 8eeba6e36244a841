import { describe, expect, it } from 'vitest';
import {
  editDistance,
  identifierNeeds,
  isEnglishWord,
  normalizeQuery,
  relatedWords,
  restrictedAccess,
  splitCompound,
  taskNeeds,
} from '#core/directory';

describe('discovery word knowledge', () => {
  it('relates everyday words to their synonyms, similar and derived words in WordNet', () => {
    const of = (word: string) => new Map(relatedWords(word).map((r) => [r.word, r.relation]));
    expect(of('throwaway').get('disposable')).toBe('similar');
    expect(of('naked').get('nude')).toBe('synonym');
    expect(of('polluted').get('pollution')).toBe('derived');
    // Inflected forms reach their lemma (morphy's detachment rules); the word itself is left out.
    expect(of('pictures').get('image')).toBe('synonym');
    expect(of('pictures').has('picture')).toBe(false);
    expect(relatedWords('qzxqvjw')).toEqual([]);
  });

  it('splits names written as one word into catalog or English words, and leaves real words alone', () => {
    const catalog = new Map([
      ['iban', 3],
      ['api', 1842],
    ]);
    expect(splitCompound('globalwinescore', catalog)).toEqual(['global', 'wine', 'score']);
    expect(splitCompound('ibanapi', catalog)).toEqual(['iban', 'api']);
    expect(splitCompound('scrapewebsite', catalog)).toEqual(['scrape', 'website']);
    expect(isEnglishWord('documentation')).toBe(true);
    expect(splitCompound('documentation', catalog)).toEqual([]);
    expect(splitCompound('stripe', catalog)).toEqual([]);
    expect(splitCompound('xkcdqzv', catalog)).toEqual([]);
  });

  it('counts the edits between two words, a swap of neighbouring letters as one', () => {
    expect(editDistance('recipies', 'recipes')).toBe(1);
    expect(editDistance('recipies', 'recipient')).toBe(2);
    expect(editDistance('grammer', 'grammar')).toBe(1);
    expect(editDistance('adress', 'address')).toBe(1);
    expect(editDistance('leauge', 'league')).toBe(1);
    expect(editDistance('twilio', 'twilio')).toBe(0);
    expect(editDistance('', 'abc')).toBe(3);
  });

  it('tells an API open only to some developers, or withdrawn, from its description, and not by a deprecated part', () => {
    // As the catalog's descriptions say it (eBay, Xero, VTEX, the New York Times, Google).
    expect(restrictedAccess('Note: This is a (Limited Release) API available only to select developers approved by business units.')).toBe(true);
    expect(restrictedAccess('The Bank Feeds API is a closed API that is only available to financial institutions')).toBe(true);
    expect(restrictedAccess('This feature is in closed beta, available only for selected customers.')).toBe(true);
    expect(restrictedAccess('Get access to comments from registered users on New York Times articles. NOTE: This API is deprecated.')).toBe(true);
    expect(restrictedAccess('Examines the call stack and variables of a running application without stopping or slowing it down. (Deprecated)')).toBe(
      true,
    );
    // A deprecated version, field, URL or webhook, and scopes for select developers, leave the API open.
    expect(restrictedAccess('Versions 1 and 2 of the Transfers API are deprecated. If you are just starting, use the latest version.')).toBe(false);
    expect(restrictedAccess('Deprecated error fields: some fields could be included with previous versions.')).toBe(false);
    expect(restrictedAccess('The payment webhooks are deprecated. Use the accounting webhooks instead.')).toBe(false);
    expect(
      restrictedAccess('The fields returned are controlled by the scopes and are available only to select developers approved by business units.'),
    ).toBe(false);
    expect(restrictedAccess('Please note that the following URLs were deprecated in September 2018')).toBe(false);
    expect(restrictedAccess('Send SMS messages worldwide; join our beta program for RCS.')).toBe(false);
    // Withdrawn or invitation-only, as AWS, Google and the VA say it (the end of a long description is read too).
    expect(restrictedAccess('Alexa for Business has been retired and is no longer supported.')).toBe(true);
    expect(restrictedAccess('Amazon Macie Classic has been discontinued and is no longer available.')).toBe(true);
    expect(
      restrictedAccess(`${'AWS IoT Things Graph connects devices and services. '.repeat(9)}The AWS IoT Things Graph service is discontinued.`),
    ).toBe(true);
    expect(restrictedAccess('This is an invitation-only API.')).toBe(true);
    expect(restrictedAccess('The Deprecated Veteran Confirmation API allows you to confirm Veteran status.')).toBe(true);
    expect(restrictedAccess('Most of these APIs are no longer supported and will not be updated.')).toBe(true);
    // A feature in beta, an older version, or a sandbox withdrawn leaves the API open.
    expect(restrictedAccess('Payouts to bank accounts. Instant payouts are in private beta.')).toBe(false);
    expect(restrictedAccess('Version 1 of the API has been deprecated; this is version 2.')).toBe(false);
    expect(restrictedAccess('There was a sandbox at https://sandbox.example.com but this has been retired.')).toBe(false);
    expect(restrictedAccess('TLS 1.0 is no longer supported; use TLS 1.2.')).toBe(false);
  });

  it('tells the identifiers a task quotes by their form, each implying the kind that looks it up', () => {
    expect(identifierNeeds('Which country is 185.220.101.4 in?')).toEqual(['ip-geolocation']);
    expect(identifierNeeds('who is behind 2001:db8::8a2e:370:7334')).toEqual(['ip-geolocation']);
    // An IBAN counts when its check digits hold (ISO 13616), grouped or not; an ISBN-13 when its check digit does.
    expect(identifierNeeds('is NL91ABNA0417164300 a real account')).toEqual(['iban-validation']);
    expect(identifierNeeds('pay BE71 0961 2345 6769 today')).toEqual(['iban-validation']);
    expect(identifierNeeds('is NL91ABNA0417164301 a real account')).toEqual([]);
    expect(identifierNeeds('who wrote 978-0-14-044913-6')).toEqual(['books']);
    expect(identifierNeeds('who wrote 978-0-14-044913-7')).toEqual([]);
    // A flight designator among words of flying; the same shape elsewhere is not one.
    expect(identifierNeeds('has LH 454 landed yet')).toEqual(['flight-status']);
    expect(identifierNeeds('is BA2490 delayed')).toEqual(['flight-status']);
    expect(identifierNeeds('LH454 FRA-MUC: did it leave on time')).toEqual(['flight-status']);
    // An IBAN written on into the next word is still read ("... 6769 EUR").
    expect(identifierNeeds('transfer 50 to BE71 0961 2345 6769 EUR')).toEqual(['iban-validation']);
    for (const other of [
      'LH 454 results',
      'how much CO2 does my flight put out',
      'my PS5 keeps crashing on the flight',
      'F1 2024 season results',
      'the finance department needs the Q3 2024 report',
      'our Q4 2025 deliveries are delayed',
    ])
      expect(identifierNeeds(other), other).toEqual([]);
    // UK postcodes and registration plates, VINs, parcels' tracking numbers, phone numbers.
    expect(identifierNeeds('addresses at SW1A 2AA')).toEqual(['address-lookup']);
    expect(identifierNeeds('is AB12 CDE taxed')).toEqual(['vehicle-records']);
    expect(identifierNeeds('recalls for VIN 1C4PJMCS8EW123456')).toEqual(['vehicle-records']);
    expect(identifierNeeds('where is 1Z999AA10123456784')).toEqual(['shipping']);
    expect(identifierNeeds('where is RR123456785GB')).toEqual(['shipping']);
    expect(identifierNeeds('who owns +44 7700 900123')).toEqual(['phone-lookup']);
    expect(identifierNeeds('who keeps calling from (415) 555-0132')).toEqual(['phone-lookup']);
    for (const other of [
      'meet at 12:30:45',
      'between 2019 and 2024',
      'the ANTIDISESTABLISHMENTARIANISM of it',
      'order 12345678',
      'a NY 10001 address',
      'MacBook Air M2 8GB price',
    ])
      expect(identifierNeeds(other), other).toEqual([]);
    // Discovery passes the task as typed: its named kinds include them, and a stated need still comes first.
    expect(
      taskNeeds(
        normalizeQuery('send a text to +44 7700 900123 saying the table is ready'),
        'send a text to +44 7700 900123 saying the table is ready',
      ),
    ).toEqual({
      stated: ['sms'],
      named: ['phone-lookup'],
      sure: [],
      all: ['sms', 'phone-lookup'],
    });
    // A plate, a VIN or a tracking number is what the task is about: its kind is sure (counted as a stated need).
    const plate = 'is the car with plate BD51 SMR taxed';
    expect(taskNeeds(normalizeQuery(plate), plate)).toEqual({
      stated: [],
      named: ['vehicle-records'],
      sure: ['vehicle-records'],
      all: ['vehicle-records'],
    });
    expect(identifierNeeds('where is 1Z999AA10123456784 now', true)).toEqual(['shipping']);
    expect(identifierNeeds('which country is 8.8.8.8 in', true)).toEqual([]);
    // A plate's form alone, without words of cars, is not a plate.
    for (const other of ['chart our FY24 YTD revenue', 'compare FY25 KPI targets', 'render in IE11 CSS grid'])
      expect(identifierNeeds(other), other).toEqual([]);
  });

  it('tells a need stated by its verb from the same word used otherwise', () => {
    /** The capabilities a task names by its wording, as discovery reads it (normalized). */
    const needsOf = (task: string) => taskNeeds(normalizeQuery(task)).all;
    expect(needsOf('text the whole team that practice is off')).toEqual(['sms']);
    expect(needsOf('let my tenant sign the lease')).toEqual(['e-signature']);
    expect(needsOf('get the client to sign off on the contract')).toEqual(['e-signature']);
    expect(needsOf('page whoever is on call')).toEqual(['on-call-alerting']);
    expect(needsOf('hear my posts read out loud')).toEqual(['text-to-speech']);
    expect(needsOf('draw a logo for my stand')).toEqual(['image-generation']);
    // Emailing people is sending email; an email address is not a need to send one.
    expect(needsOf('automatically email them a confirmation')).toEqual(['email-sending']);
    expect(needsOf('email my customers a receipt')).toEqual(['email-sending']);
    expect(needsOf('check that an email address is valid')).toEqual([]);
    expect(needsOf('is the email a customer gave us real')).toEqual(['email-validation']);
    expect(needsOf('send a password reset email from my app')).toEqual(['email-sending']);
    expect(needsOf('send welcome emails to new users')).toEqual(['email-sending']);
    for (const noun of [
      'check whether email addresses from our customers are valid',
      'check if email addresses of our staff were leaked in a breach',
      'classify incoming emails from customers by sentiment',
      'summarize emails from my boss',
      'email our subscribers the newsletter',
      'parse the confirmation email from the airline',
    ])
      expect(needsOf(noun), noun).toEqual([]);
    // Sent by email, the invoice is the need; a longer name of the email is still one sent.
    expect(needsOf('send the invoice by email')).toEqual(['invoicing']);
    expect(needsOf('send a transactional order confirmation email to the customer')).toEqual(['email-sending']);
    // Invoices made or sent are invoicing, one read or received is not; checking an address is not sending it a code.
    expect(needsOf('create and email an itemized invoice to a client')).toEqual(['invoicing']);
    expect(needsOf('bill a client for 12 hours of design work')).toEqual(['invoicing']);
    expect(needsOf('the VAT number on his invoice')).toEqual([]);
    expect(needsOf('our invoices are already HTML templates')).toEqual([]);
    expect(needsOf('an email verification service for our sign up form')).toEqual(['email-validation']);
    expect(needsOf('send an email verification code at sign up')).not.toContain('email-validation');
    // Someone with a symptom asks a symptom checker; rain or a dry day asked about is a forecast; what a band
    // played at a show is its setlist.
    expect(needsOf('my toddler has a 39-degree fever and a rash on her tummy')).toEqual(['symptom-checker']);
    expect(needsOf('he has had a cough for a week')).toEqual(['symptom-checker']);
    expect(needsOf('should I pack the gazebo, or will it stay dry?')).toEqual(['weather-forecast']);
    expect(needsOf('is it going to rain in Lisbon on Saturday')).toEqual(['weather-forecast']);
    expect(needsOf('what did Coldplay play at Wembley last August?')).toEqual(['setlists', 'live-events']);
    expect(needsOf('which songs did the band play at Wrigley Field')).toEqual(['setlists']);
    // Everyday ways of saying more kinds' needs (the fourteenth session), each beside the same words in another sense.
    for (const [task, kind] of [
      ['is the email a customer gave us real', 'email-validation'],
      ['reject throwaway ten minute email addresses at sign up', 'email-validation'],
      ['which addresses will actually receive mail', 'email-validation'],
      ["what's being reported about the dock strike", 'news'],
      ['is the first Monday in August a day off in Nova Scotia', 'public-holidays'],
      ['a photo of a lighthouse we can license', 'stock-media'],
      ['a licensed high resolution photo for my cover', 'stock-media'],
      ['send the family a link to download the photos', 'file-sharing'],
      ['an online folder my accountant can open too', 'file-sharing'],
      ['table cards that open the menu when customers scan it', 'qr-codes'],
      ['pay our freelancers straight into their bank accounts', 'payouts'],
      ['check the mobile number can actually receive texts', 'phone-lookup'],
      ['double check the bank account number a supplier sent', 'iban-validation'],
      ['ping my phone when a server goes down at night', 'on-call-alerting'],
      ['the kitchen counter cut out of my product photos', 'background-removal'],
      ['sort our reviews into happy, neutral and angry', 'sentiment-analysis'],
      ['what did Nvidia shares close at yesterday', 'stock-quotes'],
      ['is anyone giving away a bike for free', 'giveaways'],
      ['what order should the van visit them in', 'route-optimization'],
      ['which pharmacies can I walk to from the station', 'places-search'],
      ['what can I make for dinner with feta and spinach', 'recipes'],
      ['catch swear words in posts', 'content-moderation'],
      ['is that a throwaway address or a real inbox', 'email-validation'],
      ['a code that opens the menu when customers point their phone camera at it', 'qr-codes'],
      ['our order confirmation never reached her inbox', 'email-sending'],
      ['whether that message bounced or was actually delivered', 'email-sending'],
      ['send $10 of prepaid phone credit to my mum', 'mobile-top-up'],
      ['can I send her $10 of airtime', 'mobile-top-up'],
      ['which public radio broadcaster can I listen to here', 'radio-stations'],
      ['split a sofa purchase into four interest-free instalments', 'pay-later'],
      ['the driving distance between our warehouse and a delivery address', 'routing'],
      ['museums, sights and places to eat near my hotel in Rome', 'places-search'],
    ])
      expect(needsOf(task!), task).toEqual([kind]);
    for (const other of [
      'the number was reported as a scam',
      'users reported bugs in the app',
      'scan my passport for the visa form',
      "don't give away the ending",
      'show a maintenance page when the site is down',
      'the download link in the email is broken',
      'point my phone camera at a sign and translate it',
      'a phone with a good camera under 300 dollars',
      // Sentences a review found firing the patterns above in another sense.
      'is this email from my bank real or phishing',
      'is this email a scam or legit',
      'I have cabin fever',
      'we got World Cup fever show me the fixtures',
      'help with the headache of parsing dates in JavaScript',
      'plot the means with error bars around each point',
      'count the bugs reported this week',
      'when suppliers send us invoices extract the totals',
      "there's an issue with the invoice from our energy supplier",
      'send push notifications instead of emails',
      'accept mobile credit card payments at my food truck',
      'users point their phone camera at a plant and the app names it',
      'drivers photograph delivery notes then they scan them',
      "forward my post to a temporary address while I'm abroad",
      'schedule instagram posts for our happy hour',
      'in what order should the database migrations go',
      "block Sam's calendar because he is taking a day off on Friday",
      'what did I play on Spotify last week',
      'pick a random follower and give the prize away to them',
      'keep the app working offline if the server goes down',
      'require email verification before users can log in',
      'add an email verification step to our sign up flow',
      'rank the Fast and Furious installments by rating',
      'calculate monthly mortgage installments',
      'what can I make with the Twilio API',
      'a feature to check in guests at the door',
      // Not "on" or "off": signing off on a contract is signing it.
      'sign up for the newsletter',
      'cabin fever games for a rainy day',
      'I made a rash decision with a cough syrup order',
      'with a rash of new orders this week',
      'what did the team score at the weekend',
    ])
      expect(needsOf(other), other).toEqual([]);
    // Everyday ways of saying a kind's need, and the same words in other senses.
    expect(needsOf('send students a link to pay the deposit by card')).toEqual(['card-payments']);
    expect(needsOf('create a payment link for the invoice')).toEqual(['card-payments']);
    expect(needsOf('add the team offsite to our shared calendar')).toEqual(['calendar-events']);
    expect(needsOf('put the dentist appointment in the family calendar')).toEqual(['calendar-events']);
    expect(needsOf('is that link a known scam')).toEqual(['url-safety']);
    expect(needsOf('weed out subscriber addresses that would bounce')).toEqual(['email-validation']);
    for (const other of [
      'reconcile my card payments with the bank',
      'public holidays in the calendar year',
      'which stops does the 38 bus make',
      'is this attachment safe to open',
      'got a text with a link to pay an unpaid toll',
      'is this payment link legit',
      'royalty free icons for my app',
      'find a free hour in my calendar',
    ])
      expect(needsOf(other), other).toEqual([]);
    expect(needsOf('extract the text from a PDF')).toEqual([]);
    expect(needsOf('sign up new users with a password')).toEqual([]);
    expect(needsOf('read out the numbers on a receipt')).toEqual([]);
    // Named things: a team's name says which league's scores the task is about; a word's other sense does not.
    expect(needsOf('did the Lakers win last night')).toEqual(['basketball']);
    expect(needsOf('how did Arsenal do at the weekend')).toEqual(['soccer-scores']);
    expect(needsOf('how much heat does magic thunder make')).toEqual([]);
    // An artist's name says the task is about them: concerts, tours, set lists (accents and the "the" of a band's name as written).
    expect(needsOf('is Radiohead playing anywhere near Berlin')).toEqual(['live-events']);
    expect(needsOf('when is Beyoncé touring Europe')).toEqual(['live-events']);
    expect(needsOf('tickets for The Killers in Dublin')).toEqual(['live-events']);
    // A name that is also an everyday word, or that many other people have, is not on the list.
    expect(needsOf('a queen bed for the guest room')).toEqual([]);
    expect(needsOf('send Adele the invoice for March')).toEqual(['invoicing']);
    expect(needsOf('convert AC/DC voltage for a one direction motor')).toEqual([]);
    // Asking about a word is a dictionary's; written words made audio are speech synthesis, not its reverse.
    expect(needsOf('what does petrichor mean?')).toEqual(['dictionary']);
    expect(needsOf('another word for "big" in my cover letter')).toEqual(['dictionary']);
    // A terse query that is a word to define, or its synonyms; not something a developer defines.
    expect(needsOf('define serendipity')).toEqual(['dictionary']);
    expect(needsOf('synonyms for happy')).toEqual(['dictionary']);
    expect(needsOf('define a schema for my orders table')).toEqual([]);
    expect(needsOf('define pricing rules')).toEqual([]);
    // The air quality index by its abbreviation.
    expect(needsOf('aqi beijing today')).toEqual(['air-quality']);
    // A phone's address book; pictures made smaller; what was said in a workplace's chat, not a chat something is posted to.
    expect(needsOf("add the plumber to my phone's address book")).toEqual(['contacts']);
    expect(needsOf('Lease signing: collect tenant e-signatures on rental agreements')).toEqual(['e-signature']);
    // Posts read aloud; photos labelled by what they show; text or figures taken out of a photo; a CAPTCHA on a form.
    expect(needsOf('Accessibility: read blog posts aloud with a natural voice')).toEqual(['text-to-speech']);
    expect(needsOf('Listing upload: auto-tag listing photos (kitchen, pool, garden)')).toEqual(['image-recognition']);
    expect(needsOf('tag my friends in the photos from the party')).toEqual([]);
    expect(needsOf('extract dish names and prices from photos of paper menus')).toEqual(['ocr']);
    expect(needsOf('extract the dominant colors from product images')).toEqual([]);
    expect(needsOf('extract frames from uploaded videos')).toEqual([]);
    expect(needsOf('Signup form: stop bot registrations with a captcha')).toEqual(['bot-protection']);
    // Spoken requests, as a voice assistant transcribes them ("gonna" is "going to").
    expect(normalizeQuery('is it gonna freeze tonight, i gotta cover the plants')).toBe('is it going to freeze tonight i got to cover the plants');
    expect(needsOf('hey is it gonna freeze tonight in austin')).toEqual(['weather-forecast']);
    expect(needsOf("how long's it gonna take me to get from bondi to the airport")).toEqual(['routing']);
    expect(needsOf('how long will it take to get a visa for vietnam')).not.toContain('routing');
    expect(needsOf('charge the hendersons card for the two hundred they owe me')).toEqual(['card-payments']);
    expect(needsOf('charge the battery of the delivery scooters')).not.toContain('card-payments');
    expect(needsOf('resize and compress the images users upload')).toEqual(['image-resizing']);
    expect(needsOf('shrink my product photos to thumbnails')).toEqual(['image-resizing']);
    expect(needsOf('resize the browser window on mobile')).toEqual([]);
    expect(needsOf('compress the video before upload')).toEqual([]);
    expect(needsOf('find what my team said in our work chat about the invoice')).toEqual(['team-chat']);
    expect(needsOf('a bar chart image of weekly sales to post in our team chat')).toEqual([]);
    expect(needsOf('turn my newsletter into audio for subscribers')).toEqual(['text-to-speech']);
    // A verb after "that" or "her" is still the verb.
    expect(needsOf('an API that signs documents')).toEqual(['e-signature']);
    expect(needsOf('help her sign the lease')).toEqual(['e-signature']);
    expect(needsOf('a good pizza place near my hotel')).toEqual(['places-search']);
    expect(needsOf('get me a car from my hotel to the airport')).toEqual(['ride-hailing']);
    // A need stated by the wording is told from a named thing that only implies a kind.
    expect(taskNeeds(normalizeQuery('a taxi from the Coldplay concert at Wembley to my hotel'))).toEqual({
      stated: ['ride-hailing'],
      named: ['live-events'],
      sure: [],
      all: ['ride-hailing', 'live-events'],
    });
    // The verbs' and names' other senses, as developers and cooks write them.
    for (const other of [
      'search images by text',
      'translate the text the user typed',
      'sign the request with my private key',
      'draw a card from a shuffled deck',
      'summarize this article in english',
      'zoning data for a parcel of land',
      'a recipe for chicken nuggets',
      'ring the doorbell camera',
      'what does this error mean for my deploy',
      'turn the meeting audio into text',
      'got a text saying her parcel is held',
      // Phrases of this round in their other senses.
      'crimes that took place near my address',
      'convert this mp4 video into audio',
      'validate the OpenAPI definition of my service',
      'the colour opposite of orange on the wheel',
      'take the pills as directed by the pharmacist',
      'upload a ride to Strava',
      'extract a cab file from the installer',
      'get me a car insurance quote',
      'what does this mean',
      'another way to say thank you in Japanese',
      // A sign-up or sign-in form is not signed.
      'an address from the newsletter sign-up form',
      'sign in to the form builder',
    ]) {
      expect(needsOf(other), other).toEqual([]);
    }
  });

  it("drops the tails of possessives and contractions rather than searching for 's' or 't'", () => {
    expect(normalizeQuery("Cancel tonight's practice, I'd say: we don't play")).toBe('cancel tonight practice i say we do not play');
    expect(normalizeQuery('my customers’ photos, the shop’s site, we’ll see, it won‘t, I can´t')).toBe(
      'my customers photos the shop site we see it will not i can not',
    );
    expect(normalizeQuery("hits of the 90's that aren't on Spotify")).toBe('hits of the 90 that are not on spotify');
    // Not a contraction: the letters after the apostrophe go on.
    expect(normalizeQuery("O'Reilly books, rock 'n' roll")).toBe('o reilly books rock n roll');
  });
});
