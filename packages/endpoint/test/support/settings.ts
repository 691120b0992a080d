import { defineSettings } from '@kvreuse/config';
import { discoveryGroup } from '@kvreuse/discovery';
import { drainGroup } from '@kvreuse/drain';
import { endpointGroup } from '../../src/index.js';
import { transportGroup } from '@kvreuse/native-bindings';

/** The defaults of the groups an endpoint reads: what a worker started without settings runs with. */
export const defaultSettings = defineSettings([transportGroup, discoveryGroup, drainGroup, endpointGroup]).defaults;
