import { kvreuseSettings } from '@kvreuse/config';
import { builtInProfileNames, builtInProfiles } from '@kvreuse/profile-admission';

// Each built-in profile is read from the package's profiles/ folder and checked against the schema.
const profiles = builtInProfiles({ settings: kvreuseSettings });
console.log(JSON.stringify({ names: builtInProfileNames, loaded: profiles.map((profile) => profile.name) }));
