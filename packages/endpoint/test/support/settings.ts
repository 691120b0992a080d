import { defineSettings, discoveryGroup, drainGroup, endpointGroup, transportGroup } from '@kvreuse/config';

/** The defaults of the groups an endpoint reads: what a worker started without settings runs with. */
export const defaultSettings = defineSettings([transportGroup, discoveryGroup, drainGroup, endpointGroup]).defaults;
