import express from 'express';
import type { Caller } from '../auth';
import type { ProfileService } from '../profiles/profile-service';
import { profileRequestSchemas } from './profile-schemas';
import { parseRequest, type RequestSchemas } from './schemas';

/**
 * /profiles: CPU profiles of one worker at a time. Mounted inside the authenticated API router,
 * so tokens and JSON bodies are checked as for every other route.
 */
export function profileRoutes(profiles: ProfileService, requestSchemas: RequestSchemas): express.Router {
  const schemas = profileRequestSchemas(requestSchemas.workerId);
  const router = express.Router();

  // 202: the profile runs in the background; poll its Location until it is done or failed.
  router.post('/profiles', async (request, response) => {
    const body = parseRequest(schemas.profileStart, request.body === undefined ? {} : request.body, 'body');
    const record = await profiles.start(body, (response.locals.caller as Caller).name);
    response.status(202).location(`${request.baseUrl}/profiles/${record.profileId}`).json(record);
  });

  router.get('/profiles', async (request, response) => {
    const query = parseRequest(schemas.profileListQuery, request.query, 'query');
    response.json({ profiles: await profiles.list(query.limit) });
  });

  router.get('/profiles/:profileId', async (request, response) => {
    response.json(await profiles.get(parseRequest(schemas.profileId, request.params.profileId, 'path.profileId')));
  });

  router.get('/profiles/:profileId/cpuprofile', async (request, response) => {
    const { record, json } = await profiles.cpuprofile(parseRequest(schemas.profileId, request.params.profileId, 'path.profileId'));
    // e.g. worker-7-20250101T120000Z.cpuprofile (worker ids are [A-Za-z0-9._-]: safe in the header).
    const time = new Date(record.startedAtUnixMs)
      .toISOString()
      .replace(/\.\d+Z$/, 'Z')
      .replace(/[-:]/g, '');
    response.setHeader('content-type', 'application/json');
    response.setHeader('content-disposition', `attachment; filename="${record.workerId}-${time}.cpuprofile"`);
    response.send(json);
  });

  return router;
}
