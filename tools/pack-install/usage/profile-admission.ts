import { defineSettings } from '@kvreuse/config';
import { inventoryGroup } from '@kvreuse/inventory';
import { transportGroup } from '@kvreuse/native-bindings';
import { builtInProfileNames, builtInProfiles, profileGroup } from '@kvreuse/profile-admission';

// Each built-in profile is read from the package's profiles/ folder and checked against the schema and
// against the settings this process composes.
const profiles = builtInProfiles({ settings: defineSettings([transportGroup, inventoryGroup, profileGroup]) });
console.log(JSON.stringify({ names: builtInProfileNames, loaded: profiles.map((profile) => profile.name) }));
